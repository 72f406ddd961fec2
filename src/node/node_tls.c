/*
 * node_tls.c — the TLS contexts of a server, made from its configuration:
 * the secure client port (--secure-listen with --tls-cert/--tls-key and an
 * optional --tls-ca for client certificates) and peer mutual TLS
 * (--peer-tls-cert/--peer-tls-key/--peer-tls-ca: both ends present a
 * certificate and verify the other's against the CA). docs/security.md
 * explains the setup and rotation.
 */
#include <stdio.h>

#include "net/tls.h"
#include "node/node.h"
#include "os/log.h"

static const char *or_null(const char *path)
{
	return path[0] != '\0' ? path : NULL;
}

enum keel_err node_tls_open(struct node *n, char *err, size_t err_size)
{
	const struct node_config *cfg = &n->cfg;
	enum keel_err rc;
	if (cfg->secure_listen[0] != '\0') {
		struct net_tls_options client = {cfg->tls_cert, cfg->tls_key, or_null(cfg->tls_ca),
		                                 true, false};
		rc = net_tls_ctx_new(&n->client_tls, &client, err, err_size);
		if (rc != KEEL_OK) {
			return rc;
		}
	}
	if (cfg->peer_tls_cert[0] != '\0') {
		struct net_tls_options accept = {cfg->peer_tls_cert, cfg->peer_tls_key,
		                                 cfg->peer_tls_ca, true, true};
		struct net_tls_options dial = {cfg->peer_tls_cert, cfg->peer_tls_key,
		                               cfg->peer_tls_ca, false, true};
		rc = net_tls_ctx_new(&n->peer_tls_accept, &accept, err, err_size);
		if (rc == KEEL_OK) {
			rc = net_tls_ctx_new(&n->peer_tls_dial, &dial, err, err_size);
		}
		if (rc != KEEL_OK) {
			return rc;
		}
		KEEL_INFO("peer links use mutual TLS (CA %s)", cfg->peer_tls_ca);
	}
	return KEEL_OK;
}

void node_tls_close(struct node *n)
{
	net_tls_ctx_free(n->client_tls);
	net_tls_ctx_free(n->peer_tls_accept);
	net_tls_ctx_free(n->peer_tls_dial);
	n->client_tls = n->peer_tls_accept = n->peer_tls_dial = NULL;
}
