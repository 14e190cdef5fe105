/* TLS 1.3 over memory buffers (see tls.h).
 *
 * The SSL object reads and writes through one BIO of our own: reads take ciphertext from the
 * buffer the current call was given, writes append to an output buffer (the caller's, during
 * cr_tls_seal, so that ciphertext is written once). Alerts, received and sent, are noted by
 * an info callback: together with the verification result and OpenSSL's error queue they
 * say what failed in words a user can act on. */
#define _GNU_SOURCE
#include "tls.h"

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "error.h"

struct cr_tls_s {
    pthread_mutex_t lock;
    SSL *ssl;
    int is_server;
    int handshake_done;
    cr_buf_t out;   /* output waiting to be taken */
    cr_buf_t *sink; /* where the BIO writes: &out, or the caller's buffer in cr_tls_seal */
    const uint8_t *in;
    size_t in_len, in_pos;
    int alert_in, alert_out; /* the last alert description received / sent, -1: none */
    char peer_name[200];     /* a client: the server's name it checks */
    char why[320];
};

/* --- the BIO ------------------------------------------------------------------------------ */

static BIO_METHOD *bio_method;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int bio_write(BIO *b, const char *data, int len)
{
    cr_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (len <= 0)
        return 0;
    return cr_buf_append(t->sink, data, (size_t)len) == 0 ? len : -1;
}

static int bio_read(BIO *b, char *data, int len)
{
    cr_tls_t *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    size_t left = t->in ? t->in_len - t->in_pos : 0;
    if (left == 0 || len <= 0) {
        BIO_set_retry_read(b); /* no more now: the caller brings more */
        return -1;
    }
    size_t n = left < (size_t)len ? left : (size_t)len;
    memcpy(data, t->in + t->in_pos, n);
    t->in_pos += n;
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    cr_tls_t *t = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_PENDING:
        return t && t->in ? (long)(t->in_len - t->in_pos) : 0;
    default:
        return 0;
    }
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* OpenSSL's first call. No clean-up at exit: the stub's reader thread and the server's
 * executors may still be in libssl while the process exits, and must not find its locks
 * freed. */
static void init(void)
{
    OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, NULL);
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cuda-remote");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl) && BIO_meth_set_create(m, bio_create))
        bio_method = m;
}

/* --- contexts ----------------------------------------------------------------------------- */

/* OpenSSL's most recent error, in its words, after `what`. */
static void openssl_error(char *err, size_t err_len, const char *what)
{
    char detail[200] = "";
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *reason = ERR_reason_error_string(e);
        snprintf(detail, sizeof detail, ": %s", reason ? reason : "unknown error");
    }
    snprintf(err, err_len, "%s%s", what, detail);
    ERR_clear_error();
}

static SSL_CTX *new_context(int server, char *err, size_t err_len)
{
    pthread_once(&init_once, init);
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx) {
        openssl_error(err, err_len, "cannot make a TLS context");
        return NULL;
    }
    /* TLS 1.3 only: no downgrade to ciphers and handshakes a security review must argue */
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    return ctx;
}

static int use_cert_and_key(SSL_CTX *ctx, const char *cert, const char *key, char *err,
                            size_t err_len)
{
    char what[600];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(what, sizeof what, "cannot use the certificate %s", cert);
        openssl_error(err, err_len, what);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof what, "cannot use the key %s", key);
        openssl_error(err, err_len, what);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(what, sizeof what, "the key %s is not the certificate %s's", key, cert);
        openssl_error(err, err_len, what);
        return -1;
    }
    return 0;
}

cr_tls_context_t *cr_tls_server_context(const char *cert, const char *key, const char *client_ca,
                                        char *err, size_t err_len)
{
    SSL_CTX *ctx = new_context(1, err, err_len);
    if (!ctx)
        return NULL;
    if (use_cert_and_key(ctx, cert, key, err, err_len) != 0)
        goto fail;
    if (client_ca) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
        if (!names || SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
            char what[600];
            snprintf(what, sizeof what, "cannot read the client CAs %s", client_ca);
            openssl_error(err, err_len, what);
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    /* sessions are long and few: no resumption, so no tickets to send after the handshake */
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

cr_tls_context_t *cr_tls_client_context(const char *ca, const char *cert, const char *key,
                                        char *err, size_t err_len)
{
    if (!cert != !key) {
        snprintf(err, err_len, "a client certificate needs its key, and a key its certificate");
        return NULL;
    }
    SSL_CTX *ctx = new_context(0, err, err_len);
    if (!ctx)
        return NULL;
    int ok =
        ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL) : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        char what[600];
        snprintf(what, sizeof what, "cannot read the CAs %s", ca ? ca : "of the system");
        openssl_error(err, err_len, what);
        goto fail;
    }
    if (cert && use_cert_and_key(ctx, cert, key, err, err_len) != 0)
        goto fail;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

void cr_tls_context_free(cr_tls_context_t *ctx)
{
    SSL_CTX_free(ctx);
}

/* --- a connection ------------------------------------------------------------------------- */

static void on_info(const SSL *ssl, int where, int ret)
{
    cr_tls_t *t = SSL_get_app_data(ssl);
    if (!t || !(where & SSL_CB_ALERT))
        return;
    if (where & SSL_CB_READ)
        t->alert_in = ret & 0xff;
    else
        t->alert_out = ret & 0xff;
}

cr_tls_t *cr_tls_new(cr_tls_context_t *ctx, int is_server, const char *server_name)
{
    pthread_once(&init_once, init);
    if (!bio_method)
        return NULL;
    cr_tls_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->is_server = is_server;
    t->sink = &t->out;
    t->alert_in = t->alert_out = -1;
    BIO *bio = BIO_new(bio_method);
    t->ssl = SSL_new(ctx);
    if (!bio || !t->ssl) {
        BIO_free(bio);
        cr_tls_free(t);
        return NULL;
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio); /* the SSL owns it */
    SSL_set_app_data(t->ssl, t);
    SSL_set_info_callback(t->ssl, on_info);
    if (is_server) {
        /* a connection that has not said hello holds no record buffers while it waits
         * (cr_tls_keep_buffers once it is admitted) */
        SSL_set_mode(t->ssl, SSL_MODE_RELEASE_BUFFERS);
        SSL_set_accept_state(t->ssl);
        return t;
    }
    snprintf(t->peer_name, sizeof t->peer_name, "%s", server_name ? server_name : "");
    unsigned char ip[16];
    int is_ip = server_name && (inet_pton(AF_INET, server_name, ip) == 1 ||
                                inet_pton(AF_INET6, server_name, ip) == 1);
    if (server_name && *server_name) {
        X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, server_name)
                       : SSL_set_tlsext_host_name(t->ssl, server_name) == 1 &&
                             SSL_set1_host(t->ssl, server_name) == 1;
        if (!ok) {
            cr_tls_free(t);
            return NULL;
        }
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    SSL_set_connect_state(t->ssl);
    return t;
}

void cr_tls_free(cr_tls_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    cr_buf_free(&t->out);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* --- saying what failed ------------------------------------------------------------------- */

static const char *hint_ca(const cr_tls_t *t)
{
    return t->is_server ? " (not one of --tls-client-ca)" : " (trust it with CUDA_REMOTE_TLS_CA)";
}

/* The peer's certificate did not verify. */
static void explain_verify(cr_tls_t *t, long vr)
{
    const char *whose = t->is_server ? "the client's certificate" : "the server's certificate";
    switch (vr) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        snprintf(t->why, sizeof t->why, "%s has expired", whose);
        break;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        snprintf(t->why, sizeof t->why, "%s is not valid yet", whose);
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        snprintf(t->why, sizeof t->why,
                 "name mismatch: the server's certificate is not for %s "
                 "(CUDA_REMOTE_TLS_SERVER_NAME names another)",
                 t->peer_name);
        break;
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
        snprintf(t->why, sizeof t->why, "%s is signed by an unknown CA%s", whose, hint_ca(t));
        break;
    default:
        snprintf(t->why, sizeof t->why, "%s was rejected: %s", whose,
                 X509_verify_cert_error_string(vr));
    }
}

/* The peer told us, by an alert, what it did not like. */
static void explain_alert(cr_tls_t *t, int alert)
{
    const char *peer = t->is_server ? "the client" : "the server";
    switch (alert) {
    case SSL_AD_CERTIFICATE_REQUIRED:
        snprintf(t->why, sizeof t->why,
                 "no client certificate: the server requires one "
                 "(CUDA_REMOTE_TLS_CERT and CUDA_REMOTE_TLS_KEY)");
        break;
    case SSL_AD_PROTOCOL_VERSION:
        snprintf(t->why, sizeof t->why, "not TLS 1.3: %s refused the protocol version", peer);
        break;
    case SSL_AD_UNKNOWN_CA:
        snprintf(t->why, sizeof t->why, "%s does not trust our certificate: unknown CA", peer);
        break;
    case SSL_AD_CERTIFICATE_EXPIRED:
        snprintf(t->why, sizeof t->why, "%s says our certificate has expired", peer);
        break;
    default:
        snprintf(t->why, sizeof t->why, "%s refused the TLS connection: %s", peer,
                 SSL_alert_desc_string_long(alert));
    }
}

/* After a failed call: what failed, in t->why. */
static void explain(cr_tls_t *t)
{
    unsigned long e = ERR_peek_last_error();
    int reason = ERR_GET_REASON(e);
    long vr = SSL_get_verify_result(t->ssl);
    const char *peer = t->is_server ? "the client" : "the server";
    if (vr != X509_V_OK && reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
        explain_verify(t, vr);
    else if (t->alert_in >= 0 && t->alert_in != SSL_AD_CLOSE_NOTIFY)
        explain_alert(t, t->alert_in);
    else if (reason == SSL_R_UNSUPPORTED_PROTOCOL || reason == SSL_R_NO_PROTOCOLS_AVAILABLE ||
             reason == SSL_R_WRONG_SSL_VERSION)
        snprintf(t->why, sizeof t->why, "not TLS 1.3: %s offered only older versions", peer);
    else if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        snprintf(t->why, sizeof t->why,
                 "no client certificate: the client presented none and this server requires one");
    else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
             reason == SSL_R_HTTP_REQUEST || reason == SSL_R_UNEXPECTED_RECORD)
        snprintf(t->why, sizeof t->why, "%s does not speak TLS%s", peer,
                 t->is_server ? " (a plaintext client on a TLS listener: it should use tls://)"
                              : " (a plaintext listener? then drop tls:// from the address)");
    else if (e)
        snprintf(t->why, sizeof t->why, "TLS failed: %s",
                 ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "unknown error");
    else
        snprintf(t->why, sizeof t->why, "TLS failed");
    ERR_clear_error();
}

/* --- the calls ---------------------------------------------------------------------------- */

/* Starts a call with the ciphertext in. Caller holds t->lock. */
static void begin(cr_tls_t *t, const uint8_t *in, size_t in_len)
{
    ERR_clear_error(); /* the queue is per thread: nothing stale may decide SSL_get_error */
    t->in = in;
    t->in_len = in_len;
    t->in_pos = 0;
}

static size_t end(cr_tls_t *t)
{
    size_t used = t->in_pos;
    t->in = NULL;
    t->in_len = t->in_pos = 0;
    return used;
}

int cr_tls_handshake(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used)
{
    pthread_mutex_lock(&t->lock);
    begin(t, in, in_len);
    int rc = t->handshake_done ? 1 : SSL_do_handshake(t->ssl);
    int err = rc == 1 ? 0 : SSL_get_error(t->ssl, rc);
    *used = end(t);
    int result;
    if (rc == 1) {
        t->handshake_done = 1;
        result = 1;
    } else if (err == SSL_ERROR_WANT_READ) {
        result = 0;
    } else {
        explain(t);
        result = CR_EPROTO;
    }
    pthread_mutex_unlock(&t->lock);
    return result;
}

ssize_t cr_tls_read(cr_tls_t *t, const uint8_t *in, size_t in_len, size_t *used, void *dst,
                    size_t cap)
{
    pthread_mutex_lock(&t->lock);
    begin(t, in, in_len);
    int rc = SSL_read(t->ssl, dst, cap > INT_MAX ? INT_MAX : (int)cap);
    int err = rc > 0 ? 0 : SSL_get_error(t->ssl, rc);
    *used = end(t);
    ssize_t result = rc;
    if (rc <= 0) {
        if (err == SSL_ERROR_WANT_READ) {
            result = 0;
        } else if (err == SSL_ERROR_ZERO_RETURN) {
            result = CR_ECLOSED;
        } else {
            explain(t);
            result = CR_EPROTO;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return result;
}

void cr_tls_keep_buffers(cr_tls_t *t)
{
    pthread_mutex_lock(&t->lock);
    SSL_clear_mode(t->ssl, SSL_MODE_RELEASE_BUFFERS);
    pthread_mutex_unlock(&t->lock);
}

int cr_tls_has_plaintext(cr_tls_t *t)
{
    pthread_mutex_lock(&t->lock);
    int r = SSL_pending(t->ssl) > 0;
    pthread_mutex_unlock(&t->lock);
    return r;
}

/* Moves what waits in t->out to the end of out. Caller holds t->lock. */
static ssize_t take_locked(cr_tls_t *t, cr_buf_t *out)
{
    size_t n = t->out.len;
    if (n == 0)
        return 0;
    if (out->len == 0 && out->cap <= t->out.cap) { /* nothing to keep in out: swap */
        cr_buf_t tmp = *out;
        *out = t->out;
        t->out = tmp;
        t->out.len = 0;
        return (ssize_t)n;
    }
    if (cr_buf_append(out, t->out.data, n) != 0)
        return CR_ENOMEM;
    t->out.len = 0;
    return (ssize_t)n;
}

ssize_t cr_tls_seal(cr_tls_t *t, const struct iovec *iov, int n, size_t skip, size_t max,
                    cr_buf_t *out)
{
    pthread_mutex_lock(&t->lock);
    ssize_t taken = take_locked(t, out); /* what waited goes first */
    if (taken < 0) {
        pthread_mutex_unlock(&t->lock);
        return taken;
    }
    ERR_clear_error();
    t->sink = out;
    size_t done = 0;
    for (int i = 0; i < n && done < max; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        const char *p = (const char *)iov[i].iov_base + skip;
        size_t len = iov[i].iov_len - skip;
        skip = 0;
        if (len > max - done)
            len = max - done;
        while (len > 0) {
            int piece = len > (1u << 30) ? (1 << 30) : (int)len;
            int rc = SSL_write(t->ssl, p, piece);
            if (rc <= 0) {
                explain(t);
                t->sink = &t->out;
                pthread_mutex_unlock(&t->lock);
                return out->failed ? CR_ENOMEM : CR_EIO;
            }
            p += rc;
            len -= (size_t)rc;
            done += (size_t)rc;
        }
    }
    t->sink = &t->out;
    pthread_mutex_unlock(&t->lock);
    return (ssize_t)done;
}

ssize_t cr_tls_take(cr_tls_t *t, cr_buf_t *out)
{
    pthread_mutex_lock(&t->lock);
    ssize_t n = take_locked(t, out);
    pthread_mutex_unlock(&t->lock);
    return n;
}

int cr_tls_has_output(cr_tls_t *t)
{
    pthread_mutex_lock(&t->lock);
    int r = t->out.len > 0;
    pthread_mutex_unlock(&t->lock);
    return r;
}

const char *cr_tls_why(cr_tls_t *t)
{
    return t->why[0] ? t->why : "TLS failed";
}

void cr_tls_describe(cr_tls_t *t, char *out, size_t len)
{
    pthread_mutex_lock(&t->lock);
    snprintf(out, len, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
    pthread_mutex_unlock(&t->lock);
}

/* An ASN.1 string as text, refused when it holds a NUL (a name that would compare as a
 * prefix of itself). 0 or -1. */
static int asn1_text(const ASN1_STRING *s, char *out, size_t len)
{
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(&utf8, s);
    if (n < 0)
        return -1;
    int ok = memchr(utf8, 0, (size_t)n) == NULL && (size_t)n < len;
    if (ok) {
        memcpy(out, utf8, (size_t)n);
        out[n] = 0;
    }
    OPENSSL_free(utf8);
    return ok ? 0 : -1;
}

int cr_tls_peer_names(cr_tls_t *t, int (*fn)(const char *name, void *arg), void *arg)
{
    pthread_mutex_lock(&t->lock);
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    int count = 0, stop = 0;
    if (!cert || SSL_get_verify_result(t->ssl) != X509_V_OK || !t->handshake_done) {
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    char name[512], text[500];
    X509_NAME *subject = X509_get_subject_name(cert);
    for (int i = -1; !stop && (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0;) {
        X509_NAME_ENTRY *e = X509_NAME_get_entry(subject, i);
        if (asn1_text(X509_NAME_ENTRY_get_data(e), text, sizeof text) == 0) {
            snprintf(name, sizeof name, "CN=%s", text);
            count++;
            stop = fn(name, arg);
        }
    }
    GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; !stop && i < sk_GENERAL_NAME_num(sans); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        const char *kind = g->type == GEN_DNS ? "DNS" : g->type == GEN_URI ? "URI" : NULL;
        if (kind && asn1_text(g->d.ia5, text, sizeof text) == 0) {
            snprintf(name, sizeof name, "%s:%s", kind, text);
            count++;
            stop = fn(name, arg);
        }
    }
    GENERAL_NAMES_free(sans);
    pthread_mutex_unlock(&t->lock);
    return count;
}

static int first_name(const char *name, void *arg)
{
    snprintf(arg, 256, "%s", name);
    return 1;
}

void cr_tls_peer_subject(cr_tls_t *t, char *out, size_t len)
{
    char first[256] = "";
    cr_tls_peer_names(t, first_name, first);
    snprintf(out, len, "%s", first);
}

int cr_tls_looks_like_hello(const uint8_t *p, size_t n)
{
    return (n < 1 || p[0] == 0x16) && (n < 2 || p[1] == 0x03); /* handshake record, SSL 3+ */
}
