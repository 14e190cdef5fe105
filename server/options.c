/* cuda-remoted's options (options.h): the table, and the parser and usage text made from it.
 *
 * A default is a value the option's own parser takes (or the value of an environment
 * variable), applied when the option is not given: what --help says is the default is what
 * the server uses. Bounds of counts are in the table too, for the check, the usage text and
 * the error message alike. getopt_long reports unknown options, missing arguments and
 * ambiguous abbreviations itself, with the long-option list made from the table. */
#include "options.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "address.h"
#include "emu/emu_api.h"
#include "size.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define MAX_COUNT 1000000 /* no limit of the server needs more; keeps typos from passing */
#define USAGE_WIDTH 88    /* the usage text's lines end before this column */
#define HELP_COLUMN 25    /* where each option's help starts */

/* --- setters: each writes one type of member (the table's macros check it) ---------------- */

static int set_text(const cr_option_t *o, const char *text, void *field, char *why, size_t why_len)
{
    *(const char **)field = text;
    return 0;
}

static int set_listen(const cr_option_t *o, const char *text, void *field, char *why,
                      size_t why_len)
{
    cr_listen_list_t *l = field;
    if (l->count == CR_MAX_LISTEN) {
        snprintf(why, why_len, "at most %d addresses may be given", CR_MAX_LISTEN);
        return -1;
    }
    l->addr[l->count++] = text;
    return 0;
}

/* Read as atoi reads it: whether the device exists is the backend's to say. */
static int set_int(const cr_option_t *o, const char *text, void *field, char *why, size_t why_len)
{
    *(int *)field = atoi(text);
    return 0;
}

static int set_flag(const cr_option_t *o, const char *text, void *field, char *why, size_t why_len)
{
    *(int *)field = 1;
    return 0;
}

/* "4GiB", "512M", "1048576" (size.h); o->min 1 refuses what rounds down to 0 bytes. */
static int set_size(const cr_option_t *o, const char *text, void *field, char *why, size_t why_len)
{
    uint64_t bytes;
    if (cr_parse_size(text, &bytes) != 0 || bytes < o->min) {
        snprintf(why, why_len, "not a size");
        return -1;
    }
    *(uint64_t *)field = bytes;
    return 0;
}

/* Decimal digits only, within [o->min, o->max]. */
static int parse_count(const cr_option_t *o, const char *text, unsigned long *v)
{
    char *end;
    *v = strtoul(text, &end, 10);
    return *text >= '0' && *text <= '9' && !*end && *v >= o->min && *v <= o->max ? 0 : -1;
}

static int set_count(const cr_option_t *o, const char *text, void *field, char *why, size_t why_len)
{
    unsigned long v;
    if (parse_count(o, text, &v) != 0) {
        snprintf(why, why_len, "not a count (%lu to %lu)", o->min, o->max);
        return -1;
    }
    *(unsigned *)field = (unsigned)v;
    return 0;
}

/* Stored in milliseconds. */
static int set_seconds(const cr_option_t *o, const char *text, void *field, char *why,
                       size_t why_len)
{
    unsigned long v;
    if (parse_count(o, text, &v) != 0) {
        snprintf(why, why_len, "not a count of seconds (%lu to %lu)", o->min, o->max);
        return -1;
    }
    *(unsigned *)field = (unsigned)v * 1000;
    return 0;
}

static int set_fault_scope(const cr_option_t *o, const char *text, void *field, char *why,
                           size_t why_len)
{
    if (strcmp(text, "session") != 0 && strcmp(text, "context") != 0) {
        snprintf(why, why_len, "session or context");
        return -1;
    }
    *(int *)field = strcmp(text, "context") == 0;
    return 0;
}

static int set_compute_capability(const cr_option_t *o, const char *text, void *field, char *why,
                                  size_t why_len)
{
    if (cr_emu_parse_compute_capability(text, field) != 0) {
        snprintf(why, why_len, "not a compute capability the emulated device knows (%s)",
                 CR_EMU_COMPUTE_CAPABILITIES);
        return -1;
    }
    return 0;
}

/* --- the table ---------------------------------------------------------------------------- */

/* The member an option sets, with a compile-time check that it has the type its setter
 * writes (_Generic has no branch for any other type). */
#define FIELD(member, type)                                                                        \
    .offset = offsetof(cr_server_options_t, member) +                                              \
              0 * sizeof(_Generic(((cr_server_options_t *)0)->member, type : 1))
#define TEXT(member) .set = set_text, FIELD(member, const char *)
#define INT(member) .set = set_int, FIELD(member, int)
#define FLAG(member) .set = set_flag, FIELD(member, int)
#define SIZE(member) .set = set_size, FIELD(member, uint64_t)
#define COUNT(member) .set = set_count, FIELD(member, unsigned), .max = MAX_COUNT
#define SECONDS(member, lo, hi) .set = set_seconds, FIELD(member, unsigned), .min = lo, .max = hi

static const cr_option_t table[] = {
    {.name = "listen",
     .letter = 'l',
     .arg = "ADDR",
     .deflt = CR_DEFAULT_ADDR,
     .set = set_listen,
     FIELD(listen, cr_listen_list_t),
     .help = "host:port, host (port " STR(CR_DEFAULT_PORT) ") or unix:/path; repeatable"},
    {.name = "backend",
     .arg = "KIND",
     .deflt = "auto",
     TEXT(backend.kind),
     .help = "auto (the GPU if one is usable, else emu), cuda (NVIDIA's driver) or emu "
             "(emulated device, no GPU)"},
    {.name = "device",
     .arg = "N",
     .deflt = "0",
     INT(backend.device),
     .help = "which GPU this server serves"},
    {.name = "driver",
     .arg = "PATH",
     TEXT(backend.driver_path),
     .usual = "the usual places",
     .help = "NVIDIA's libcuda.so.1"},
    {.name = "emu-memory",
     .arg = "SIZE",
     SIZE(backend.emu_memory),
     .usual = "16GiB, or half the host's memory if less",
     .help = "emulated device memory, e.g. 4GiB"},
    {.name = "emu-trace",
     .arg = "FILE",
     .env = "CUDA_REMOTE_EMU_TRACE",
     TEXT(backend.emu_trace),
     .help = "record emulated launches there"},
    {.name = "emu-faults",
     .arg = "SCOPE",
     .deflt = "session",
     .set = set_fault_scope,
     FIELD(backend.emu_context_faults, int),
     .help = "what an emulated kernel fault breaks: session (only the faulting client's) or "
             "context (every session's state, as on a GPU; the server then starts afresh)"},
    {.name = "emu-compute-capability",
     .arg = "X.Y",
     .deflt = "9.0",
     .set = set_compute_capability,
     FIELD(backend.emu_compute_capability, unsigned),
     .help = "the compute capability the emulated device reports, and so which code of a "
             "library it loads and which PTX it runs; one of " CR_EMU_COMPUTE_CAPABILITIES},
    {.name = "max-queued",
     .arg = "SIZE",
     .deflt = "256MiB",
     SIZE(max_queued),
     .help = "input a client may have waiting to run before the server stops reading its "
             "connection"},
    {.name = "max-queued-per-tenant",
     .arg = "SIZE",
     .deflt = "1GiB",
     .min = 1,
     SIZE(limits.tenant_queued),
     .help = "the same for all of a tenant's clients together"},
    {.name = "max-unsent",
     .arg = "SIZE",
     .deflt = "64MiB",
     .min = 1,
     SIZE(limits.unsent),
     .help = "replies a client has not read yet before the server runs nothing more of its "
             "and stops reading it"},
    {.name = "max-connections",
     .arg = "N",
     COUNT(limits.connections),
     .usual = "0: what the open-file limit allows once the server raised it to its hard one",
     .help = "open connections at once"},
    {.name = "max-per-address",
     .arg = "N",
     .deflt = "256",
     COUNT(limits.per_address),
     .help = "open connections from one address (Unix-socket clients count per user); 0: any"},
    {.name = "hello-timeout",
     .arg = "SECONDS",
     .deflt = "10",
     SECONDS(limits.hello_timeout_ms, 1, 3600),
     .help = "a connection that has not said hello by then is dropped"},
    {.name = "max-sessions-per-tenant",
     .arg = "N",
     .deflt = "1024",
     COUNT(limits.tenant_sessions),
     .help = "a tenant's sessions at once, unless its entry in the tenants file says "
             "(\"sessions\"); 0: any"},
    {.name = "max-shared",
     .arg = "SIZE",
     .deflt = "16GiB",
     .min = 1,
     SIZE(max_shared),
     .help = "memory a tenant's clients on this host may share with the server together "
             "(their page-locked memory and copy staging), which the server pins; past it "
             "page-locked memory stays the client's (copies of it then use the socket, "
             "kernels cannot reach it)"},
    {.name = "no-shm",
     FLAG(no_shm),
     .help = "decline shared memory from clients on Unix sockets (their bytes then travel "
             "over the socket)"},
    {.name = "tls-cert",
     .arg = "FILE",
     TEXT(tls.cert),
     .help = "the server's certificate (PEM, chain allowed): every TCP listener speaks TLS 1.3 "
             "(needs --tls-key); SIGHUP reads it again"},
    {.name = "tls-key",
     .arg = "FILE",
     TEXT(tls.key),
     .help = "the certificate's private key (PEM)"},
    {.name = "tls-client-ca",
     .arg = "FILE",
     TEXT(tls.client_ca),
     .help = "CAs (PEM) one of which must have signed every TCP client's certificate (mutual "
             "TLS); a tenant whose \"cert\" names it then needs no token"},
    {.name = "insecure",
     FLAG(insecure),
     .help = "allow a plaintext TCP listener on an address other than loopback (anyone on the "
             "network reads and forges its traffic)"},
    {.name = "tenants",
     .arg = "FILE",
     TEXT(tenants_file),
     .usual = "one tenant, \"default\", with the whole device",
     .help = "tenants (JSON: name, token, memory, weight, priority, compute_limit, sessions, "
             "admin, cert); clients then need CUDA_REMOTE_TOKEN or a client certificate; "
             "SIGHUP reloads it"},
    {.name = "metrics",
     .arg = "ADDR",
     TEXT(metrics),
     .help = "serve Prometheus metrics at http://ADDR/metrics (host:port; only trusted "
             "clients should reach it)"},
    {.name = "log",
     .arg = "LEVEL",
     .env = "CUDA_REMOTE_LOG",
     .deflt = "info",
     TEXT(log_level),
     .help = "debug, info, warn, error or off"},
    {.name = "help", .letter = 'h', .help = "print this text and exit"},
};

#define TABLE_COUNT (sizeof table / sizeof table[0])

const cr_option_t *cr_options_table(size_t *count)
{
    *count = TABLE_COUNT;
    return table;
}

/* --- usage text --------------------------------------------------------------------------- */

/* " [0 to 1000000; default: 256]", " [default: $CUDA_REMOTE_LOG, else info]", or "". */
static void describe_default(const cr_option_t *o, char *out, size_t len)
{
    char range[64] = "", deflt[128] = "";
    if (o->max)
        snprintf(range, sizeof range, "%lu to %lu", o->min, o->max);
    if (o->usual)
        snprintf(deflt, sizeof deflt, "default: %s", o->usual);
    else if (o->env)
        snprintf(deflt, sizeof deflt, "default: $%s%s%s", o->env, o->deflt ? ", else " : "",
                 o->deflt ? o->deflt : "");
    else if (o->deflt)
        snprintf(deflt, sizeof deflt, "default: %s", o->deflt);
    if (!range[0] && !deflt[0])
        *out = '\0';
    else
        snprintf(out, len, " [%s%s%s]", range, range[0] && deflt[0] ? "; " : "", deflt);
}

/* Prints text word by word from column `at`, lines continued at HELP_COLUMN. */
static void print_wrapped(FILE *out, const char *text, int at)
{
    int first = 1;
    while (*text) {
        text += strspn(text, " ");
        int len = (int)strcspn(text, " ");
        if (!len)
            break;
        if (!first && at + 1 + len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", HELP_COLUMN, "");
            at = HELP_COLUMN;
        } else if (!first) {
            fputc(' ', out);
            at++;
        }
        fwrite(text, 1, (size_t)len, out);
        at += len;
        text += len;
        first = 0;
    }
    fputc('\n', out);
}

void cr_options_usage(FILE *out)
{
    fputs("usage: cuda-remoted [options]\n", out);
    for (size_t i = 0; i < TABLE_COUNT; i++) {
        const cr_option_t *o = &table[i];
        char head[80], text[1024], deflt[200];
        int n = snprintf(head, sizeof head, "  %c%c%c --%s%s%s", o->letter ? '-' : ' ',
                         o->letter ? o->letter : ' ', o->letter ? ',' : ' ', o->name,
                         o->arg ? " " : "", o->arg ? o->arg : "");
        describe_default(o, deflt, sizeof deflt);
        snprintf(text, sizeof text, "%s%s", o->help, deflt);
        if (n + 2 <= HELP_COLUMN)
            fprintf(out, "%-*s", HELP_COLUMN, head);
        else
            fprintf(out, "%s\n%*s", head, HELP_COLUMN, "");
        print_wrapped(out, text, HELP_COLUMN);
    }
}

/* --- parsing ------------------------------------------------------------------------------ */

/* getopt_long's value for table[i]: its letter, or a code past every character. */
static int option_value(size_t i)
{
    return table[i].letter ? table[i].letter : 256 + (int)i;
}

static const cr_option_t *option_by_value(int value)
{
    for (size_t i = 0; i < TABLE_COUNT; i++)
        if (option_value(i) == value)
            return &table[i];
    return NULL;
}

/* Sets o's member from `text`; `from` says where a value not on the command line came from.
 * 0, or -1 after a message. */
static int apply(const cr_option_t *opt, const char *text, const char *from, cr_server_options_t *o)
{
    char why[256];
    if (opt->set(opt, text, (char *)o + opt->offset, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "cuda-remoted: --%s%s%s%s: %s\n", opt->name, text ? " " : "", text ? text : "",
            from ? from : "", why);
    return -1;
}

/* The default of every option not given. 0, or -1 after a message. */
static int apply_defaults(const int *given, cr_server_options_t *o)
{
    for (size_t i = 0; i < TABLE_COUNT; i++) {
        const cr_option_t *opt = &table[i];
        const char *env = opt->env ? getenv(opt->env) : NULL;
        char from[80] = " (its default)";
        if (given[i] || !opt->set || (!env && !opt->deflt))
            continue;
        if (env)
            snprintf(from, sizeof from, " (from $%s)", opt->env);
        if (apply(opt, env ? env : opt->deflt, from, o) != 0)
            return -1;
    }
    return 0;
}

int cr_options_parse(int argc, char **argv, cr_server_options_t *o)
{
    struct option longopts[TABLE_COUNT + 1];
    char shortopts[2 * TABLE_COUNT + 1];
    int given[TABLE_COUNT] = {0};
    size_t ns = 0;
    for (size_t i = 0; i < TABLE_COUNT; i++) {
        longopts[i] = (struct option){table[i].name, table[i].arg ? required_argument : no_argument,
                                      NULL, option_value(i)};
        if (table[i].letter) {
            shortopts[ns++] = table[i].letter;
            if (table[i].arg)
                shortopts[ns++] = ':';
        }
    }
    longopts[TABLE_COUNT] = (struct option){NULL, 0, NULL, 0};
    shortopts[ns] = '\0';
    memset(o, 0, sizeof *o);
    optind = 0; /* glibc: start afresh, so that a second parse reads its own argv */
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const cr_option_t *opt = option_by_value(c);
        if (!opt) { /* getopt_long has said what is wrong */
            cr_options_usage(stderr);
            return 2;
        }
        if (!opt->set) {
            cr_options_usage(stdout);
            return 0;
        }
        if (apply(opt, optarg, NULL, o) != 0)
            return 2;
        given[opt - table] = 1;
    }
    if (optind < argc) {
        fprintf(stderr, "cuda-remoted: unexpected argument %s\n", argv[optind]);
        cr_options_usage(stderr);
        return 2;
    }
    return apply_defaults(given, o) == 0 ? -1 : 2;
}
