/* addr.c — "host:port" parsing and formatting, listening sockets. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

enum keel_err net_parse_addr(const char *text, struct sockaddr_storage *out)
{
	char host[256];
	const char *port_str;
	memset(out, 0, sizeof(*out));
	if (text[0] == '[') {
		const char *end = strchr(text, ']');
		if (end == NULL || end[1] != ':' || (size_t)(end - text - 1) >= sizeof(host)) {
			return KEEL_INVAL;
		}
		memcpy(host, text + 1, (size_t)(end - text - 1));
		host[end - text - 1] = '\0';
		port_str = end + 2;
	} else {
		const char *colon = strrchr(text, ':');
		if (colon == NULL || (size_t)(colon - text) >= sizeof(host)) {
			return KEEL_INVAL;
		}
		memcpy(host, text, (size_t)(colon - text));
		host[colon - text] = '\0';
		port_str = colon + 1;
	}
	char *endp;
	long port = strtol(port_str, &endp, 10);
	if (*port_str == '\0' || *endp != '\0' || port < 0 || port > 65535) {
		return KEEL_INVAL;
	}
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
	if (host[0] == '\0' || strcmp(host, "*") == 0) {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_ANY);
		sin->sin_port = htons((uint16_t)port);
		return KEEL_OK;
	}
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		return KEEL_OK;
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		return KEEL_OK;
	}
	/* A name: resolved once, at start-up (blocking is acceptable there). */
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL) {
		return KEEL_NOENT;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	if (res->ai_family == AF_INET) {
		sin->sin_port = htons((uint16_t)port);
	} else {
		sin6->sin6_port = htons((uint16_t)port);
	}
	freeaddrinfo(res);
	return KEEL_OK;
}

void net_format_addr(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		port = ntohs(sin->sin_port);
		snprintf(buf, size, "%s:%u", host, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		port = ntohs(sin6->sin6_port);
		snprintf(buf, size, "[%s]:%u", host, port);
	} else {
		snprintf(buf, size, "?");
	}
}

enum keel_err net_listen(uv_tcp_t *server, uv_loop_t *loop, const char *addr,
			 uv_connection_cb on_connection, void *data, char *errbuf, size_t errsize)
{
	struct sockaddr_storage ss;
	if (net_parse_addr(addr, &ss) != KEEL_OK) {
		snprintf(errbuf, errsize, "cannot parse address '%s' (want HOST:PORT)", addr);
		return KEEL_INVAL;
	}
	int rc = uv_tcp_init(loop, server);
	if (rc != 0) {
		snprintf(errbuf, errsize, "socket: %s", uv_strerror(rc));
		return KEEL_IO;
	}
	server->data = data;
	rc = uv_tcp_bind(server, (const struct sockaddr *)&ss, 0);
	if (rc == 0) {
		rc = uv_listen((uv_stream_t *)server, 1024, on_connection);
	}
	if (rc != 0) {
		snprintf(errbuf, errsize, "cannot listen on %s: %s", addr, uv_strerror(rc));
		return KEEL_IO;
	}
	return KEEL_OK;
}
