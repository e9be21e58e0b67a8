/* listen_addr.h - a TCP listening address as vad.conf writes it (metrics_listen): an IPv4
 * address or a bracketed IPv6 address, a colon and a port ("127.0.0.1:9477", "[::1]:9477"). */
#ifndef VAD_LISTEN_ADDR_H
#define VAD_LISTEN_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Longest address text a config value may hold ("[v6 address%zone]:65535" fits). */
#define VAD_LISTEN_ADDR_MAX 80

/* Parse text into *ss and *len; 0, or -1 with a sentence saying what is wrong in err. Numeric
 * addresses only: a name would depend on the resolver when the daemon starts. */
int vad_listen_addr_parse(const char *text, struct sockaddr_storage *ss, socklen_t *len, char *err,
			  size_t err_len);

#endif
