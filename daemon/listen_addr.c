/* listen_addr.c - "HOST:PORT" to a socket address; see listen_addr.h. */
#include "listen_addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vad_listen_addr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len, char *err,
			  size_t err_len)
{
	char host[VAD_LISTEN_ADDR_MAX];
	const char *colon;
	bool v6 = text[0] == '[';
	if (strlen(text) >= sizeof(host)) {
		snprintf(err, err_len, "too long (at most %d characters)", VAD_LISTEN_ADDR_MAX - 1);
		return -1;
	}
	if (v6) {
		const char *close = strchr(text, ']');
		if (!close || close[1] != ':') {
			snprintf(err, err_len,
				 "an IPv6 address needs brackets and a port, e.g. [::1]:9477");
			return -1;
		}
		memcpy(host, text + 1, (size_t)(close - text - 1));
		host[close - text - 1] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon) {
			snprintf(err, err_len,
				 "expected ADDRESS:PORT, e.g. 127.0.0.1:9477 or [::1]:9477");
			return -1;
		}
		memcpy(host, text, (size_t)(colon - text));
		host[colon - text] = '\0';
	}
	const char *port_text = colon + 1;
	unsigned long port = 0;
	const char *p = port_text;
	for (; *p && isdigit((unsigned char)*p) && p - port_text < 6; p++)
		port = port * 10 + (unsigned long)(*p - '0');
	if (p == port_text || *p || port < 1 || port > 65535) {
		snprintf(err, err_len, "port '%s' is not a number from 1 to 65535", port_text);
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
			snprintf(err, err_len, "'%s' is not a numeric IPv6 address", host);
			return -1;
		}
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
			snprintf(err, err_len,
				 "'%s' is not a numeric IPv4 address (write 127.0.0.1, not a name; "
				 "IPv6 in brackets)",
				 host);
			return -1;
		}
		*len = sizeof(*a);
	}
	return 0;
}
