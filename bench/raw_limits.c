/* The machine's limits, measured the way the remoting layer uses the machine, so that each
 * benchmark figure can be reported as a ratio to a limit taken in the same run.
 *
 *   raw_limits tcp|unix|shm|memcpy
 *   raw_limits tls CERT KEY [CIPHERSUITE]
 *
 * Prints one JSON object per line: {"transport":..,"metric":..,"value":..,"unit":..}.
 *   rtt_blocking_us     64-byte request, 16-byte reply, blocking reads on both sides (the
 *                       mean of 20 000, or of as many as one second allows)
 *   rtt_spin_us         the same with both sides spinning on non-blocking reads
 *   msg_rate_per_s      128-byte messages coalesced into 64 KiB writes, one ack at the end
 *   bulk_1m_gbps        one stream of 1 MiB writes (256 MiB in all), then an ack
 *   bulk_64m_gbps       the same with 64 MiB writes
 *   transfer_gbps       (with "size") synchronous transfers of SIZE bytes, 4 KiB .. 256 MiB:
 *                       from a SIZE-byte buffer into one on the other side (in writes of at
 *                       most 8 MiB), each answered by a 16-byte ack; the limit of a
 *                       synchronous copy of that size, cache misses of large buffers included
 *   memcpy_1m_gbps      memcpy of 1 MiB (cache-resident), one core
 *   memcpy_64m_gbps     memcpy of 64 MiB (memory), one core
 *   memcpy_gbps         (with "size") memcpy of SIZE bytes, 4 KiB .. 256 MiB, one core: the
 *                       limit of the shared-memory path, which copies each byte once a side
 * For shm, the "transport" is a shared-memory ring between two processes: the round trips
 * spin or futex-wait on a flag, the stream moves bytes through a 4 MiB ring.
 *
 * tls is the TCP measurements over TLS 1.3 (OpenSSL on the sockets, the server's certificate
 * and key from the PEM files CERT and KEY, the client verifying nothing: a handshake is not
 * measured), the ciphersuite CIPHERSUITE (e.g. TLS_AES_256_GCM_SHA384) or else OpenSSL's
 * choice; a first record {"metric":"cipher","name":..} says which was negotiated. Each side
 * reads ahead up to 32 KiB and writes its records through a 256 KiB buffer flushed after
 * each message, as the remoting layer seals and sends 256 KiB at a time; the spinning round
 * trip polls the socket without blocking, then reads the record. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void emit_sized(const char *transport, const char *metric, double value, const char *unit,
                       size_t size)
{
    printf("{\"transport\":\"%s\",\"metric\":\"%s\",\"value\":%.6g,\"unit\":\"%s\"", transport,
           metric, value, unit);
    if (size)
        printf(",\"size\":%zu", size);
    printf("}\n");
    fflush(stdout);
}

static void emit(const char *transport, const char *metric, double value, const char *unit)
{
    emit_sized(transport, metric, value, unit, 0);
}

/* --- sockets -------------------------------------------------------------------------------- */

static SSL *tls; /* this process's end of the connection over TLS; NULL: plaintext */

static ssize_t tls_result(int r)
{
    if (r > 0)
        return r;
    int e = SSL_get_error(tls, r);
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    ERR_print_errors_fp(stderr);
    errno = EIO;
    return -1;
}

/* recv(2), or through TLS: MSG_DONTWAIT polls the socket (EAGAIN when nothing came) and
 * then reads a whole record, blocking for its rest. */
static ssize_t io_recv(int fd, void *buf, size_t n, int flags)
{
    if (!tls)
        return recv(fd, buf, n, flags);
    if (flags & MSG_DONTWAIT) {
        char c;
        if (!SSL_has_pending(tls) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) {
            errno = EAGAIN;
            return -1;
        }
    }
    return tls_result(SSL_read(tls, buf, n > INT_MAX ? INT_MAX : (int)n));
}

/* send(2) of all n bytes, or through TLS, the buffered records flushed after. */
static ssize_t io_send(int fd, const void *buf, size_t n)
{
    if (!tls)
        return send(fd, buf, n, MSG_NOSIGNAL);
    ssize_t w = tls_result(SSL_write(tls, buf, n > INT_MAX ? INT_MAX : (int)n));
    if (w > 0 && BIO_flush(SSL_get_wbio(tls)) != 1) {
        errno = EIO;
        return -1;
    }
    return w;
}

static void full_read(int fd, void *buf, size_t n, int spin)
{
    char *p = buf;
    while (n) {
        ssize_t r = io_recv(fd, p, n, spin ? MSG_DONTWAIT : 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            continue;
        } else {
            die("recv");
        }
    }
}

static void full_write(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = io_send(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            die("send");
        }
    }
}

static void socket_pair(const char *transport, int *client, int *server)
{
    int lfd;
    if (strcmp(transport, "unix") == 0) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "/tmp/cr-raw-%d.sock", (int)getpid());
        unlink(a.sun_path);
        lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (bind(lfd, (void *)&a, sizeof a) || listen(lfd, 1))
            die("bind");
        *client = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(*client, (void *)&a, sizeof a))
            die("connect");
        *server = accept(lfd, NULL, NULL);
        unlink(a.sun_path);
        int size = 4 << 20; /* as limits.md measured the Unix stream */
        setsockopt(*client, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
        setsockopt(*server, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        if (bind(lfd, (void *)&a, sizeof a) || listen(lfd, 1) || getsockname(lfd, (void *)&a, &len))
            die("bind");
        *client = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(*client, (void *)&a, sizeof a))
            die("connect");
        *server = accept(lfd, NULL, NULL);
        int one = 1;
        setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    close(lfd);
}

enum { ROUND_TRIPS = 20000, MESSAGES = 2000000, BULK = 256 << 20 };
#define ROUND_TRIPS_S 1.0

#define TRANSFER_MIN ((size_t)4 << 10)
#define TRANSFER_MAX ((size_t)256 << 20)
#define TRANSFER_WRITE ((size_t)8 << 20) /* as the remoting layer's copy chunks */

/* Repetitions of a SIZE-byte transfer: ~400 MB in all, as remote_bench copies. */
static int transfer_reps(size_t size)
{
    size_t reps = ((size_t)400 << 20) / size;
    return reps < 1 ? 1 : reps > 2000 ? 2000 : (int)reps;
}

static void write_in_pieces(int fd, const char *buf, size_t size)
{
    for (size_t off = 0; off < size; off += TRANSFER_WRITE)
        full_write(fd, buf + off, size - off < TRANSFER_WRITE ? size - off : TRANSFER_WRITE);
}

/* The serving side of every socket measurement, in a child process. */
static void serve(int fd)
{
    char *buf = malloc(64 << 20);
    for (;;) {
        char cmd;
        if (io_recv(fd, &cmd, 1, MSG_WAITALL) != 1)
            exit(0);
        if (cmd == 'p' || cmd == 's') { /* round trips */
            int spin = cmd == 's', last = 0;
            while (!last) {
                full_read(fd, buf, 64, spin);
                last = buf[0];
                full_write(fd, buf, 16);
            }
        } else if (cmd == 'm') { /* coalesced messages */
            size_t left = (size_t)MESSAGES * 128;
            while (left) {
                ssize_t r = io_recv(fd, buf, left < (64 << 10) ? left : (64 << 10), 0);
                if (r <= 0)
                    die("recv");
                left -= (size_t)r;
            }
            full_write(fd, "k", 1);
        } else if (cmd == 'b') { /* bulk */
            size_t left = BULK;
            while (left) {
                ssize_t r = io_recv(fd, buf, left < (64 << 20) ? left : (64 << 20), 0);
                if (r <= 0)
                    die("recv");
                left -= (size_t)r;
            }
            full_write(fd, "k", 1);
        } else if (cmd == 'x') { /* sized transfers */
            uint64_t size;
            full_read(fd, &size, sizeof size, 0);
            char *dst = malloc(size), ack[16] = {0};
            memset(dst, 0, size);
            for (int i = transfer_reps(size); i > 0; i--) {
                full_read(fd, dst, size, 0);
                full_write(fd, ack, sizeof ack);
            }
            free(dst);
        }
    }
}

/* ROUND_TRIPS round trips, or as many as fit in ROUND_TRIPS_S seconds (two parties spinning
 * on a busy machine may each wait for the other's time slice); the first byte of a request
 * says whether it is the last. */
static double round_trips(int fd, int spin)
{
    char req[64] = {0}, rep[16];
    full_write(fd, spin ? "s" : "p", 1);
    double t0 = now();
    int n = 0;
    while (!req[0]) {
        req[0] = ++n == ROUND_TRIPS || now() - t0 > ROUND_TRIPS_S;
        full_write(fd, req, sizeof req);
        full_read(fd, rep, sizeof rep, spin);
    }
    return (now() - t0) / n * 1e6;
}

static double message_rate(int fd)
{
    static char batch[64 << 10];
    full_write(fd, "m", 1);
    double t0 = now();
    size_t left = (size_t)MESSAGES * 128;
    while (left) {
        size_t n = left < sizeof batch ? left : sizeof batch;
        full_write(fd, batch, n);
        left -= n;
    }
    char k;
    full_read(fd, &k, 1, 0);
    return MESSAGES / (now() - t0);
}

static double bulk(int fd, size_t chunk)
{
    char *buf = malloc(chunk);
    memset(buf, 1, chunk);
    full_write(fd, "b", 1);
    double t0 = now();
    for (size_t sent = 0; sent < BULK; sent += chunk)
        full_write(fd, buf, chunk);
    char k;
    full_read(fd, &k, 1, 0);
    double gbps = BULK / (now() - t0) / 1e9;
    free(buf);
    return gbps;
}

static double transfer(int fd, size_t size)
{
    uint64_t sz = size;
    char *src = malloc(size), ack[16];
    memset(src, 1, size);
    full_write(fd, "x", 1);
    full_write(fd, &sz, sizeof sz);
    int reps = transfer_reps(size);
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        write_in_pieces(fd, src, size);
        full_read(fd, ack, sizeof ack, 0);
    }
    double gbps = (double)size * reps / (now() - t0) / 1e9;
    free(src);
    return gbps;
}

/* --- TLS ------------------------------------------------------------------------------------ */

typedef struct {
    const char *cert, *key, *suites; /* cert NULL: plaintext */
} tls_files_t;

#define TLS_BUFFER (256 << 10) /* records written at once */
/* Read ahead two records' worth: OpenSSL 3.0 moves what is left in its read buffer to the
 * front before each record, so a larger buffer costs more copying than it saves reads (a
 * profile with 256 KiB: 5% of the time in that memmove). */
#define TLS_READ_AHEAD (32 << 10)

static void tls_die(const char *what)
{
    fprintf(stderr, "raw_limits: TLS: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* The end of a TLS 1.3 connection on the connected socket fd, after the handshake. */
static SSL *tls_start(const tls_files_t *f, int fd, int server)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION))
        tls_die("no context");
    if (f->suites && !SSL_CTX_set_ciphersuites(ctx, f->suites))
        tls_die("unknown ciphersuite");
    if (server && (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1 ||
                   SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1))
        tls_die("cannot use the certificate and key");
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, TLS_READ_AHEAD);
    SSL *ssl = SSL_new(ctx);
    BIO *in = BIO_new_socket(fd, BIO_NOCLOSE), *out = BIO_new(BIO_f_buffer());
    if (!ssl || !in || !out || !BIO_set_write_buffer_size(out, TLS_BUFFER) ||
        !BIO_push(out, BIO_new_socket(fd, BIO_NOCLOSE)))
        tls_die("out of memory");
    SSL_set_bio(ssl, in, out);
    if ((server ? SSL_accept(ssl) : SSL_connect(ssl)) != 1)
        tls_die("handshake failed");
    SSL_CTX_free(ctx); /* the connection holds its own reference */
    return ssl;
}

static void sockets(const char *transport, const tls_files_t *f)
{
    int c, s;
    socket_pair(transport, &c, &s);
    pid_t child = fork();
    if (child == 0) {
        close(c);
        if (f->cert)
            tls = tls_start(f, s, 1);
        serve(s);
        exit(0);
    }
    close(s);
    if (f->cert) {
        tls = tls_start(f, c, 0);
        printf("{\"transport\":\"%s\",\"metric\":\"cipher\",\"name\":\"%s\",\"version\":\"%s\"}\n",
               transport, SSL_get_cipher_name(tls), SSL_get_version(tls));
        fflush(stdout);
    }
    emit(transport, "rtt_blocking_us", round_trips(c, 0), "us");
    emit(transport, "rtt_spin_us", round_trips(c, 1), "us");
    emit(transport, "msg_rate_per_s", message_rate(c), "1/s");
    emit(transport, "bulk_1m_gbps", bulk(c, 1 << 20), "GB/s");
    emit(transport, "bulk_64m_gbps", bulk(c, 64 << 20), "GB/s");
    for (size_t size = TRANSFER_MIN; size <= TRANSFER_MAX; size *= 4)
        emit_sized(transport, "transfer_gbps", transfer(c, size), "GB/s", size);
    if (tls) {
        SSL_shutdown(tls); /* close_notify: the server's read ends cleanly */
        SSL_free(tls);
        tls = NULL;
    }
    close(c);
    waitpid(child, NULL, 0);
}

/* --- shared memory -------------------------------------------------------------------------- */

#define RING (4u << 20)

typedef struct {
    _Atomic uint32_t turn;       /* round trips: 0 client's, 1 server's; futex word */
    _Atomic uint64_t head, tail; /* stream: bytes written, bytes read */
    _Atomic int done;
    char req[64], rep[16];
    char ring[RING];
} shm_t;

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void shm_wait(_Atomic uint32_t *turn, uint32_t want, int spin)
{
    while (atomic_load(turn) != want)
        if (!spin)
            futex_wait(turn, !want);
}

static double shm_round_trips(shm_t *m, int spin)
{
    double t0 = now();
    for (int i = 0; i < ROUND_TRIPS; i++) {
        memcpy(m->req, "x", 1);
        atomic_store(&m->turn, 1);
        if (!spin)
            futex_wake(&m->turn);
        shm_wait(&m->turn, 0, spin);
    }
    return (now() - t0) / ROUND_TRIPS * 1e6;
}

static void shm_serve_round_trips(shm_t *m, int spin)
{
    for (int i = 0; i < ROUND_TRIPS; i++) {
        shm_wait(&m->turn, 1, spin);
        memcpy(m->rep, m->req, 1);
        atomic_store(&m->turn, 0);
        if (!spin)
            futex_wake(&m->turn);
    }
}

/* One copy in (producer) and one copy out (consumer), through the ring. */
static double shm_stream(shm_t *m, size_t chunk)
{
    char *src = malloc(chunk);
    memset(src, 2, chunk);
    double t0 = now();
    for (uint64_t sent = 0; sent < BULK;) {
        uint64_t space = RING - (atomic_load(&m->head) - atomic_load(&m->tail));
        if (space < (64 << 10))
            continue;
        size_t n = chunk < space ? chunk : space;
        n = n < RING - (atomic_load(&m->head) % RING) ? n : RING - (atomic_load(&m->head) % RING);
        if (n > BULK - sent)
            n = BULK - sent;
        memcpy(m->ring + atomic_load(&m->head) % RING, src + sent % chunk, n);
        atomic_fetch_add(&m->head, n);
        sent += n;
    }
    while (atomic_load(&m->tail) != BULK)
        ;
    double gbps = BULK / (now() - t0) / 1e9;
    free(src);
    return gbps;
}

static void shm_serve_stream(shm_t *m)
{
    char *dst = malloc(RING);
    while (atomic_load(&m->tail) < BULK) {
        uint64_t avail = atomic_load(&m->head) - atomic_load(&m->tail);
        if (!avail)
            continue;
        size_t n = avail < RING - atomic_load(&m->tail) % RING
                       ? avail
                       : RING - atomic_load(&m->tail) % RING;
        memcpy(dst, m->ring + atomic_load(&m->tail) % RING, n);
        atomic_fetch_add(&m->tail, n);
    }
    free(dst);
}

static void shared_memory(void)
{
    shm_t *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap");
    memset(m, 0, sizeof *m);
    pid_t child = fork();
    if (child == 0) {
        shm_serve_round_trips(m, 0);
        shm_serve_round_trips(m, 1);
        shm_serve_stream(m);
        exit(0);
    }
    emit("shm", "rtt_blocking_us", shm_round_trips(m, 0), "us");
    emit("shm", "rtt_spin_us", shm_round_trips(m, 1), "us");
    emit("shm", "bulk_1m_gbps", shm_stream(m, 1 << 20), "GB/s");
    waitpid(child, NULL, 0);
    munmap(m, sizeof *m);
}

/* --- memcpy ---------------------------------------------------------------------------------- */

static double memcpy_rate(size_t size, int rounds)
{
    char *a = malloc(size), *b = malloc(size);
    memset(a, 3, size);
    memset(b, 4, size);
    double t0 = now();
    for (int i = 0; i < rounds; i++) {
        memcpy(b, a, size);
        __asm__ volatile("" ::"r"(b) : "memory");
    }
    double gbps = (double)size * rounds / (now() - t0) / 1e9;
    free(a);
    free(b);
    return gbps;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: raw_limits tcp|unix|shm|memcpy\n"
                        "       raw_limits tls CERT KEY [CIPHERSUITE]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(argv[1], "tcp") || !strcmp(argv[1], "unix"))
        sockets(argv[1], &(tls_files_t){NULL, NULL, NULL});
    else if (!strcmp(argv[1], "tls") && argc >= 4)
        sockets(argv[1], &(tls_files_t){argv[2], argv[3], argc > 4 ? argv[4] : NULL});
    else if (!strcmp(argv[1], "shm"))
        shared_memory();
    else if (!strcmp(argv[1], "memcpy")) {
        emit("memcpy", "memcpy_1m_gbps", memcpy_rate(1 << 20, 4000), "GB/s");
        emit("memcpy", "memcpy_64m_gbps", memcpy_rate(64 << 20, 40), "GB/s");
        for (size_t size = TRANSFER_MIN; size <= TRANSFER_MAX; size *= 4)
            emit_sized("memcpy", "memcpy_gbps", memcpy_rate(size, transfer_reps(size)), "GB/s",
                       size);
    } else {
        fprintf(stderr, "raw_limits: unknown %s\n", argv[1]);
        return 2;
    }
    return 0;
}
