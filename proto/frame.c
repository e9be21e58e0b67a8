/* frame.c - length-prefixed framing; see frame.h. */
#include "frame.h"

enum vad_frame_status vad_frame_peek(const uint8_t *buf, size_t avail, size_t max_payload,
				     size_t *payload_len)
{
	if (avail < VAD_FRAME_HEADER)
		return VAD_FRAME_NEED_MORE;
	uint32_t len = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
		       (uint32_t)buf[3] << 24;
	if (len > max_payload)
		return VAD_FRAME_TOO_BIG;
	if (len == 0)
		return VAD_FRAME_EMPTY;
	*payload_len = len;
	if (avail - VAD_FRAME_HEADER < len)
		return VAD_FRAME_NEED_MORE;
	return VAD_FRAME_READY;
}

void vad_frame_put_header(uint8_t *out, uint32_t len)
{
	out[0] = (uint8_t)len;
	out[1] = (uint8_t)(len >> 8);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 24);
}

size_t vad_frame_encode_request(const Vad__Request *req, uint8_t *out, size_t cap)
{
	size_t len = vad__request__get_packed_size(req);
	if (len > UINT32_MAX || cap < VAD_FRAME_HEADER + len)
		return 0;
	vad_frame_put_header(out, (uint32_t)len);
	vad__request__pack(req, out + VAD_FRAME_HEADER);
	return VAD_FRAME_HEADER + len;
}

size_t vad_frame_encode_response(const Vad__Response *resp, uint8_t *out, size_t cap)
{
	size_t len = vad__response__get_packed_size(resp);
	if (len > UINT32_MAX || cap < VAD_FRAME_HEADER + len)
		return 0;
	vad_frame_put_header(out, (uint32_t)len);
	vad__response__pack(resp, out + VAD_FRAME_HEADER);
	return VAD_FRAME_HEADER + len;
}

size_t vad_frame_response_size(const Vad__Response *resp)
{
	return VAD_FRAME_HEADER + vad__response__get_packed_size(resp);
}

size_t vad_frame_request_size(const Vad__Request *req)
{
	return VAD_FRAME_HEADER + vad__request__get_packed_size(req);
}
