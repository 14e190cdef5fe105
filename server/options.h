/* cuda-remoted's command-line options.
 *
 * One table (options.c) says, for every option, its name, its argument, its help, its
 * default and the function that parses and checks its value. The parser's long-option list,
 * the usage text (--help), the defaults and the error messages all come from it, so adding
 * an option is one entry there. Parsing only fills a cr_server_options_t; main.c applies it.
 *
 * Threads: main's, before any other starts. */
#ifndef CR_SERVER_OPTIONS_H
#define CR_SERVER_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "guard.h"
#include "loop.h"
#include "tls_config.h"

typedef struct {
    const char *addr[CR_MAX_LISTEN];
    int count;
} cr_listen_list_t;

/* What the command line asks for, defaults filled in. */
typedef struct {
    cr_listen_list_t listen;
    cr_backend_options_t backend;
    cr_guard_limits_t limits;
    uint64_t max_queued;      /* a session's unrun input before its reading stops */
    int no_shm;               /* decline shared memory from Unix-socket clients */
    uint64_t max_shared;      /* a session's shared memory, which the server pins */
    const char *log_level;    /* for CUDA_REMOTE_LOG */
    const char *tenants_file; /* NULL: one tenant, "default", with the whole device */
    const char *metrics;      /* NULL: no metrics listener */
    cr_tls_files_t tls;       /* cert NULL: no TLS */
    int insecure;             /* allow plaintext TCP listeners on other than loopback */
} cr_server_options_t;

typedef struct cr_option_s cr_option_t;

/* Parses and checks `text`, then stores it in `field`, the member of cr_server_options_t
 * the option sets. 0, or -1 with the reason in why. */
typedef int (*cr_option_set_fn)(const cr_option_t *o, const char *text, void *field, char *why,
                                size_t why_len);

struct cr_option_s {
    const char *name;       /* the long form, without "--" */
    char letter;            /* the short form, or 0 */
    const char *arg;        /* the argument's name in the usage text; NULL: takes none */
    const char *help;       /* one paragraph; the usage text wraps it */
    const char *env;        /* an environment variable whose value is the default, or NULL */
    const char *deflt;      /* the value when neither the option nor env is given, or NULL */
    const char *usual;      /* the default in words, where it is no value (shown, not applied) */
    cr_option_set_fn set;   /* NULL for --help */
    size_t offset;          /* of the member of cr_server_options_t that set fills */
    unsigned long min, max; /* bounds for counts (max 0: none); sizes: min 1 refuses 0 */
};

/* The table, in usage order. */
const cr_option_t *cr_options_table(size_t *count);

/* Parses argv into *o: the options given, then the defaults of those not given. Returns -1
 * when the server should start; else the exit status: 0 after --help (the usage text on
 * stdout), 2 after a message on stderr that names the option and says what is wrong. */
int cr_options_parse(int argc, char **argv, cr_server_options_t *o);

/* Writes the usage text (what --help prints). */
void cr_options_usage(FILE *out);

#endif
