/* The server's TLS settings and context (see tls_config.h). */
#include "tls_config.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>

#include "error.h"
#include "log.h"

static cr_tls_files_t files;
static cr_tls_context_t *current; /* the loop thread's, after load */

/* Warns when the certificate has expired or soon will: clients will refuse it. */
static void check_expiry(cr_tls_context_t *ctx)
{
    X509 *cert = SSL_CTX_get0_certificate(ctx);
    if (!cert)
        return;
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
        CR_WARN("TLS: the certificate %s has expired: clients will refuse it", files.cert);
    else if (X509_cmp_time(X509_get0_notAfter(cert), &(time_t){time(NULL) + 7 * 86400}) <= 0)
        CR_WARN("TLS: the certificate %s expires within 7 days", files.cert);
}

static cr_tls_context_t *make(char *err, size_t err_len)
{
    cr_tls_context_t *ctx =
        cr_tls_server_context(files.cert, files.key, files.client_ca, err, err_len);
    if (ctx)
        check_expiry(ctx);
    return ctx;
}

int cr_tls_config_load(const cr_tls_files_t *f, char *err, size_t err_len)
{
    files = *f;
    if (!files.cert && !files.key && !files.client_ca)
        return 0;
    if (!files.cert || !files.key) {
        snprintf(err, err_len, "--tls-cert and --tls-key go together%s",
                 files.client_ca ? " (and --tls-client-ca needs both)" : "");
        return CR_EINVAL;
    }
    current = make(err, err_len);
    return current ? 0 : CR_EINVAL;
}

void cr_tls_config_reload(void)
{
    if (!current)
        return;
    char err[512];
    cr_tls_context_t *ctx = make(err, sizeof err);
    if (!ctx) {
        CR_ERROR("TLS: certificates not reloaded, the current ones stay: %s", err);
        return;
    }
    cr_tls_context_free(current); /* open connections hold their own references */
    current = ctx;
    CR_INFO("TLS: certificate %s reloaded%s%s", files.cert,
            files.client_ca ? ", client CAs from " : "", files.client_ca ? files.client_ca : "");
}

int cr_tls_config_enabled(void)
{
    return current != NULL;
}

int cr_tls_config_verifies_clients(void)
{
    return current && files.client_ca;
}

cr_tls_t *cr_tls_config_connection(void)
{
    return current ? cr_tls_new(current, 1, NULL) : NULL;
}

const char *cr_tls_config_describe(void)
{
    return !current          ? "plaintext"
           : files.client_ca ? "TLS 1.3, client certificates required"
                             : "TLS 1.3";
}
