/* Tenants: who a client is (its token), what it may hold (a device-memory quota), its
 * weight and priority, and what it used.
 *
 *   {"tenants": [{"name": "alice", "token": "...", "memory": "2GiB", "weight": 1,
 *                 "priority": "normal", "admin": false, "sessions": 64,
 *                 "compute_limit": "30%", "cert": "CN=alice"}]}
 *
 * A tenant is known by its token, or by the client certificate "cert" names ("CN=name": the
 * subject's common name; "DNS:name" or "URI:uri": a subject alternative name) when the
 * server verifies client certificates (--tls-client-ca); it has one or both.
 *
 * "sessions" bounds the clients a tenant may have connected at once (default: the
 * server's --max-sessions-per-tenant); "compute_limit" caps its device time even when the
 * device is otherwise idle (sched.c).
 *
 * An admin tenant's clients see every tenant and session in `cuda-remote status`; the
 * others see their own tenant and sessions.
 *
 * Without a file every client is the tenant "default" with the whole device. A reload
 * (SIGHUP) updates tenants in place by name, so their sessions and usage carry on; a
 * tenant gone from the file takes no new sessions, and its sessions run on under the
 * limits it had. Tenant records are never freed: sessions point at them for their life.
 * Usage counters are atomics, updated from every server thread. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "size.h"
#include "tenants.h"

#define FILE_MAX (1 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* the list and its settings */
static cr_tenant_t *tenants;
static char *file_path;

const char *cr_priority_name(int priority)
{
    return priority == CR_PRIORITY_HIGH ? "high" : priority == CR_PRIORITY_LOW ? "low" : "normal";
}

static cr_tenant_t *tenant_new(const char *name)
{
    cr_tenant_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->weight = 1;
    t->priority = CR_PRIORITY_NORMAL;
    return t;
}

/* One entry of the file, checked; fills `out` (name, token, quota, weight, priority,
 * admin, max_sessions). */
static int parse_entry(const cJSON *e, int index, cr_tenant_t *out, char *err, size_t len)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *token = cJSON_GetObjectItemCaseSensitive(e, "token");
    const cJSON *memory = cJSON_GetObjectItemCaseSensitive(e, "memory");
    const cJSON *weight = cJSON_GetObjectItemCaseSensitive(e, "weight");
    const cJSON *priority = cJSON_GetObjectItemCaseSensitive(e, "priority");
    const cJSON *admin = cJSON_GetObjectItemCaseSensitive(e, "admin");
    const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(e, "sessions");
    const cJSON *limit = cJSON_GetObjectItemCaseSensitive(e, "compute_limit");
    const cJSON *cert = cJSON_GetObjectItemCaseSensitive(e, "cert");
    if (!cJSON_IsObject(e)) {
        snprintf(err, len, "tenant %d is not an object", index);
        return CR_EINVAL;
    }
    if (!cJSON_IsString(name) || !name->valuestring[0] ||
        strlen(name->valuestring) >= sizeof out->name ||
        strspn(name->valuestring, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789_.-") != strlen(name->valuestring)) {
        snprintf(err, len, "tenant %d: \"name\" must be 1-63 of A-Z a-z 0-9 _ . -", index);
        return CR_EINVAL;
    }
    snprintf(out->name, sizeof out->name, "%s", name->valuestring);
    if ((token || !cert) && (!cJSON_IsString(token) || strlen(token->valuestring) < 8 ||
                             strlen(token->valuestring) >= sizeof out->token)) {
        snprintf(err, len, "tenant %s: \"token\" must be a string of 8-255 characters%s", out->name,
                 token ? "" : " (or the tenant needs a \"cert\")");
        return CR_EINVAL;
    }
    snprintf(out->token, sizeof out->token, "%s", token ? token->valuestring : "");
    out->cert[0] = 0;
    if (cert) {
        const char *c = cJSON_IsString(cert) ? cert->valuestring : "";
        size_t prefix = !strncmp(c, "CN=", 3)                              ? 3
                        : !strncmp(c, "DNS:", 4) || !strncmp(c, "URI:", 4) ? 4
                                                                           : 0;
        if (!prefix || !c[prefix] || strlen(c) >= sizeof out->cert) {
            snprintf(err, len,
                     "tenant %s: \"cert\" must be \"CN=name\", \"DNS:name\" or \"URI:uri\" "
                     "(under 256 characters)",
                     out->name);
            return CR_EINVAL;
        }
        snprintf(out->cert, sizeof out->cert, "%s", c);
    }
    out->quota = 0;
    if (cJSON_IsString(memory)) {
        if (cr_parse_size(memory->valuestring, &out->quota) != 0) {
            snprintf(err, len, "tenant %s: \"memory\": %s is not a size", out->name,
                     memory->valuestring);
            return CR_EINVAL;
        }
    } else if (cJSON_IsNumber(memory)) {
        if (!(memory->valuedouble >= 1) || memory->valuedouble > 1.8e19) {
            snprintf(err, len, "tenant %s: \"memory\" must be positive", out->name);
            return CR_EINVAL;
        }
        out->quota = (uint64_t)memory->valuedouble;
    } else if (memory) {
        snprintf(err, len, "tenant %s: \"memory\" must be a size such as \"2GiB\"", out->name);
        return CR_EINVAL;
    }
    out->weight = 1;
    if (weight &&
        (!cJSON_IsNumber(weight) || !(weight->valuedouble > 0) || weight->valuedouble > 1e6)) {
        snprintf(err, len, "tenant %s: \"weight\" must be a positive number", out->name);
        return CR_EINVAL;
    }
    if (weight)
        out->weight = weight->valuedouble;
    out->priority = CR_PRIORITY_NORMAL;
    if (priority) {
        const char *p = cJSON_IsString(priority) ? priority->valuestring : "";
        if (strcmp(p, "low") == 0)
            out->priority = CR_PRIORITY_LOW;
        else if (strcmp(p, "high") == 0)
            out->priority = CR_PRIORITY_HIGH;
        else if (strcmp(p, "normal") != 0) {
            snprintf(err, len, "tenant %s: \"priority\" must be low, normal or high", out->name);
            return CR_EINVAL;
        }
    }
    if (admin && !cJSON_IsBool(admin)) {
        snprintf(err, len, "tenant %s: \"admin\" must be true or false", out->name);
        return CR_EINVAL;
    }
    out->admin = cJSON_IsTrue(admin);
    if (sessions && (!cJSON_IsNumber(sessions) || !(sessions->valuedouble >= 1) ||
                     sessions->valuedouble > 1000000 ||
                     sessions->valuedouble != (double)(unsigned)sessions->valuedouble)) {
        snprintf(err, len, "tenant %s: \"sessions\" must be a whole number from 1 to 1000000",
                 out->name);
        return CR_EINVAL;
    }
    out->max_sessions = sessions ? (unsigned)sessions->valuedouble : 0;
    /* "30%", or a part of 1 */
    out->compute_limit = 0;
    if (limit) {
        char *end = NULL;
        double v = cJSON_IsNumber(limit)   ? limit->valuedouble
                   : cJSON_IsString(limit) ? strtod(limit->valuestring, &end) / 100
                                           : -1;
        if (cJSON_IsString(limit) && (end == limit->valuestring || strcmp(end, "%") != 0))
            v = -1;
        if (!(v > 0 && v <= 1)) {
            snprintf(err, len,
                     "tenant %s: \"compute_limit\" must be a percentage such as "
                     "\"30%%\" (more than 0, at most 100)",
                     out->name);
            return CR_EINVAL;
        }
        out->compute_limit = v < 1 ? v : 0; /* 100% is no limit */
    }
    return 0;
}

static char *read_file(const char *path, char *err, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = malloc(FILE_MAX + 1);
    size_t n = text ? fread(text, 1, FILE_MAX + 1, f) : 0;
    int failed = ferror(f);
    fclose(f);
    if (!text || failed || n > FILE_MAX) {
        snprintf(err, len, "%s: %s", path,
                 !text    ? "out of memory"
                 : failed ? "read error"
                          : "larger than 1 MiB");
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

/* Parses the file into a fresh array of entries; NULL with a reason. */
static cr_tenant_t *parse_file(const char *path, int *count, char *err, size_t len)
{
    char *text = read_file(path, err, len);
    if (!text)
        return NULL;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *list = root ? cJSON_GetObjectItemCaseSensitive(root, "tenants") : NULL;
    if (!root || !cJSON_IsArray(list)) {
        snprintf(err, len, "%s: %s", path, root ? "no \"tenants\" array" : "not valid JSON");
        cJSON_Delete(root);
        return NULL;
    }
    int n = cJSON_GetArraySize(list);
    cr_tenant_t *entries = calloc(n ? (size_t)n : 1, sizeof *entries);
    int i = 0, bad = entries == NULL;
    if (bad)
        snprintf(err, len, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        if (bad || parse_entry(e, i, &entries[i], err, len) != 0) {
            bad = 1;
            break;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(entries[j].name, entries[i].name) ||
                (entries[i].token[0] && !strcmp(entries[j].token, entries[i].token)) ||
                (entries[i].cert[0] && !strcmp(entries[j].cert, entries[i].cert))) {
                snprintf(err, len, "tenants %s and %s share a %s", entries[j].name, entries[i].name,
                         !strcmp(entries[j].name, entries[i].name) ? "name"
                         : entries[i].token[0] && !strcmp(entries[j].token, entries[i].token)
                             ? "token"
                             : "cert");
                bad = 1;
            }
        i++;
    }
    cJSON_Delete(root);
    if (bad) {
        free(entries);
        return NULL;
    }
    *count = n;
    return entries;
}

static cr_tenant_t *find_by_name(const char *name)
{
    for (cr_tenant_t *t = tenants; t; t = t->next)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

/* Applies parsed entries: updates tenants by name, adds new ones, retires the rest. */
static int apply(const cr_tenant_t *entries, int n, char *err, size_t len)
{
    pthread_mutex_lock(&lock);
    for (cr_tenant_t *t = tenants; t; t = t->next)
        t->removed = 1;
    int err_code = 0;
    for (int i = 0; i < n; i++) {
        cr_tenant_t *t = find_by_name(entries[i].name);
        if (!t) { /* appended: listings keep the file's order */
            if (!(t = tenant_new(entries[i].name))) {
                snprintf(err, len, "out of memory");
                err_code = CR_ENOMEM;
                break;
            }
            cr_tenant_t **tail = &tenants;
            while (*tail)
                tail = &(*tail)->next;
            *tail = t;
        }
        memcpy(t->token, entries[i].token, sizeof t->token);
        memcpy(t->cert, entries[i].cert, sizeof t->cert);
        __atomic_store_n(&t->quota, entries[i].quota, __ATOMIC_RELAXED);
        __atomic_store(&t->weight, &entries[i].weight, __ATOMIC_RELAXED); /* sched.c reads it */
        __atomic_store_n(&t->priority, entries[i].priority, __ATOMIC_RELAXED);
        __atomic_store_n(&t->admin, entries[i].admin, __ATOMIC_RELAXED);
        __atomic_store_n(&t->max_sessions, entries[i].max_sessions, __ATOMIC_RELAXED);
        __atomic_store(&t->compute_limit, &entries[i].compute_limit, __ATOMIC_RELAXED);
        t->removed = 0;
    }
    pthread_mutex_unlock(&lock);
    return err_code;
}

int cr_tenants_load(const char *path, char *err, size_t len)
{
    if (!path) { /* everyone is "default", with the whole device */
        pthread_mutex_lock(&lock);
        if (!tenants && (tenants = tenant_new("default")))
            tenants->admin = 1; /* the only tenant: nothing to hide from it */
        pthread_mutex_unlock(&lock);
        return tenants ? 0 : CR_ENOMEM;
    }
    int n;
    cr_tenant_t *entries = parse_file(path, &n, err, len);
    if (!entries)
        return CR_EINVAL;
    int r = apply(entries, n, err, len);
    explicit_bzero(entries, (size_t)n * sizeof *entries); /* tokens */
    free(entries);
    if (r == 0 && !file_path)
        file_path = strdup(path);
    return r;
}

void cr_tenants_reload(void)
{
    if (!file_path) {
        CR_INFO("reload asked for, but there is no tenants file");
        return;
    }
    char err[256];
    if (cr_tenants_load(file_path, err, sizeof err) != 0) {
        CR_ERROR("tenants not reloaded, the current ones stay: %s", err);
        return;
    }
    int n = 0;
    pthread_mutex_lock(&lock);
    for (cr_tenant_t *t = tenants; t; t = t->next)
        n += !t->removed;
    pthread_mutex_unlock(&lock);
    CR_INFO("tenants reloaded from %s: %d tenant%s", file_path, n, n == 1 ? "" : "s");
}

int cr_tenants_from_file(void)
{
    return file_path != NULL;
}

/* Compares in time independent of where the strings differ. */
static int token_equal(const char *a, const char *b, size_t b_len)
{
    size_t a_len = strlen(a);
    unsigned char diff = a_len != b_len;
    for (size_t i = 0; i < b_len; i++)
        diff |= (unsigned char)(a[i < a_len ? i : 0] ^ b[i]);
    return diff == 0;
}

cr_tenant_t *cr_tenants_find(const char *token, size_t len, const char **why)
{
    pthread_mutex_lock(&lock);
    cr_tenant_t *found = NULL;
    if (!file_path) {
        found = tenants; /* "default" */
    } else if (!token) {
        *why = "this server has tenants: set CUDA_REMOTE_TOKEN to your tenant's token";
    } else {
        for (cr_tenant_t *t = tenants; t; t = t->next)
            if (!t->removed && t->token[0] && token_equal(t->token, token, len))
                found = t;
        if (!found)
            *why = "the token (CUDA_REMOTE_TOKEN) was rejected: no tenant has it";
    }
    pthread_mutex_unlock(&lock);
    return found;
}

cr_tenant_t *cr_tenants_find_cert(int (*has_name)(const char *name, void *arg), void *arg)
{
    pthread_mutex_lock(&lock);
    cr_tenant_t *found = NULL;
    for (cr_tenant_t *t = file_path ? tenants : NULL; t && !found; t = t->next)
        if (!t->removed && t->cert[0] && has_name(t->cert, arg))
            found = t;
    pthread_mutex_unlock(&lock);
    return found;
}

CUresult cr_tenant_charge(cr_tenant_t *t, uint64_t bytes)
{
    uint64_t quota = __atomic_load_n(&t->quota, __ATOMIC_RELAXED);
    uint64_t used = __atomic_load_n(&t->used, __ATOMIC_RELAXED);
    do {
        if (used + bytes < used || (quota && used + bytes > quota))
            return CUDA_ERROR_OUT_OF_MEMORY;
    } while (!__atomic_compare_exchange_n(&t->used, &used, used + bytes, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return CUDA_SUCCESS;
}

void cr_tenant_uncharge(cr_tenant_t *t, uint64_t bytes)
{
    __atomic_sub_fetch(&t->used, bytes, __ATOMIC_ACQ_REL);
}

int cr_tenant_stream_priority(const cr_tenant_t *t, int asked, int least, int greatest)
{
    int level = t ? __atomic_load_n(&t->priority, __ATOMIC_RELAXED) : CR_PRIORITY_NORMAL;
    if (greatest > least) /* not the usual order (lower is higher): leave it alone */
        return asked;
    if (level == CR_PRIORITY_HIGH)
        return greatest;
    if (level == CR_PRIORITY_LOW)
        return least;
    if (cr_tenants_from_file() && greatest < least && asked <= greatest)
        asked = greatest + 1; /* the greatest is high tenants' */
    return asked < greatest ? greatest : asked > least ? least : asked;
}

void cr_tenants_foreach(void (*fn)(const cr_tenant_t *t, void *arg), void *arg)
{
    pthread_mutex_lock(&lock);
    for (cr_tenant_t *t = tenants; t; t = t->next)
        fn(t, arg);
    pthread_mutex_unlock(&lock);
}
