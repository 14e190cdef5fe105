/* Device printf (the vprintf builtin nvcc calls) and assertion messages.
 *
 * nvcc lowers printf(fmt, ...) to vprintf(fmt, args): fmt is a generic pointer to the format
 * string (a .global .b8 $str array of the module), args a pointer to a local buffer holding
 * the arguments after the default promotions, each at an offset aligned to its size (int,
 * char and short take 4 bytes; long, long long, double and pointers 8). The text is formatted
 * here, conversion by conversion, and collected per block; the block's output goes to the
 * embedder's sink when the block ends. */
#include <stdio.h>
#include <stdlib.h>

#include "exec.h"

#define MAX_FORMAT 4096
#define MAX_STRING 4096
#define MAX_BLOCK_OUTPUT ((size_t)8 << 20)

void cr__out_append(cr__worker_t *wk, const char *text, size_t len)
{
    if (wk->out_len + len > MAX_BLOCK_OUTPUT)
        return; /* as a full printf FIFO: dropped */
    if (wk->out_len + len > wk->out_cap) {
        size_t cap = wk->out_cap ? wk->out_cap * 2 : 4096;
        while (cap < wk->out_len + len)
            cap *= 2;
        char *n = realloc(wk->out, cap);
        if (!n)
            return;
        wk->out = n;
        wk->out_cap = cap;
    }
    memcpy(wk->out + wk->out_len, text, len);
    wk->out_len += len;
}

/* Reads the next argument of `size` bytes at the aligned offset *off. */
static int next_arg(cr__worker_t *wk, const cr__warp_t *w, uint32_t lane, uint64_t args,
                    uint64_t *off, unsigned size, uint64_t *v)
{
    *off = (*off + size - 1) / size * size;
    *v = 0;
    int rc = cr__generic_read(wk, w, lane, args + *off, v, size);
    *off += size;
    return rc;
}

/* Each conversion is handed to snprintf as a spec built here from the kernel's format, with
 * the argument type the spec asks for: a format that is not a literal is the point. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
int cr__vprintf(cr__worker_t *wk, cr__warp_t *w, uint32_t lane, uint64_t fmt_addr, uint64_t args)
{
    char *fmt = malloc(MAX_FORMAT), *str = malloc(MAX_STRING), *text = NULL;
    size_t text_len = 0, text_cap = 0;
    int count = 0, rc = 0;
    uint64_t off = 0;
    if (!fmt || !str)
        goto out;
    if ((rc = cr__read_string(wk, w, lane, fmt_addr, fmt, MAX_FORMAT)))
        goto out;
    for (const char *p = fmt; *p;) {
        char piece[MAX_STRING + 128];
        int n;
        if (*p != '%') {
            const char *q = p;
            while (*q && *q != '%')
                q++;
            n = (int)(q - p);
            if (n > (int)sizeof piece - 1)
                n = (int)sizeof piece - 1;
            memcpy(piece, p, (size_t)n);
            p += n;
        } else if (p[1] == '%') {
            piece[0] = '%';
            n = 1;
            p += 2;
        } else {
            /* one conversion: %[flags][width][.precision][length]conv */
            char spec[64];
            size_t s = 0;
            spec[s++] = *p++;
            while (*p && strchr("-+ #0", *p) && s < 20)
                spec[s++] = *p++;
            for (int part = 0; part < 2; part++) {
                if (part == 1) {
                    if (*p != '.')
                        break;
                    spec[s++] = *p++;
                }
                if (*p == '*') {
                    uint64_t v;
                    if ((rc = next_arg(wk, w, lane, args, &off, 4, &v)))
                        goto out;
                    s += (size_t)snprintf(spec + s, sizeof spec - s, "%d", (int32_t)v);
                    p++;
                    count++;
                } else {
                    while (*p >= '0' && *p <= '9' && s < 40)
                        spec[s++] = *p++;
                }
            }
            int longs = 0, halfs = 0;
            while (*p && strchr("hlLqjzt", *p)) {
                if (*p == 'h')
                    halfs++;
                else
                    longs++;
                p++;
            }
            char conv = *p ? *p++ : 0;
            uint64_t v = 0;
            int wide = longs > 0;
            if (strchr("diouxXc", conv) && conv) {
                if ((rc = next_arg(wk, w, lane, args, &off, wide ? 8 : 4, &v)))
                    goto out;
                int is_signed = conv == 'd' || conv == 'i';
                if (conv == 'c') {
                    spec[s++] = 'c';
                    spec[s] = 0;
                    n = snprintf(piece, sizeof piece, spec, (int)(uint32_t)v);
                } else {
                    spec[s++] = 'l';
                    spec[s++] = 'l';
                    spec[s++] = conv;
                    spec[s] = 0;
                    long long sv;
                    unsigned long long uv;
                    if (wide) {
                        sv = (long long)v;
                        uv = v;
                    } else if (halfs == 1) {
                        sv = (short)v;
                        uv = (unsigned short)v;
                    } else if (halfs >= 2) {
                        sv = (signed char)v;
                        uv = (unsigned char)v;
                    } else {
                        sv = (int32_t)v;
                        uv = (uint32_t)v;
                    }
                    n = is_signed ? snprintf(piece, sizeof piece, spec, sv)
                                  : snprintf(piece, sizeof piece, spec, uv);
                }
                count++;
            } else if (conv && strchr("fFeEgGaA", conv)) {
                if ((rc = next_arg(wk, w, lane, args, &off, 8, &v)))
                    goto out;
                spec[s++] = conv;
                spec[s] = 0;
                n = snprintf(piece, sizeof piece, spec, F64(v));
                count++;
            } else if (conv == 's') {
                if ((rc = next_arg(wk, w, lane, args, &off, 8, &v)))
                    goto out;
                if (!v)
                    strcpy(str, "(null)");
                else if ((rc = cr__read_string(wk, w, lane, v, str, MAX_STRING)))
                    goto out;
                spec[s++] = 's';
                spec[s] = 0;
                n = snprintf(piece, sizeof piece, spec, str);
                count++;
            } else if (conv == 'p') {
                if ((rc = next_arg(wk, w, lane, args, &off, 8, &v)))
                    goto out;
                spec[s++] = 'p';
                spec[s] = 0;
                n = snprintf(piece, sizeof piece, spec, (void *)(uintptr_t)v);
                count++;
            } else if (conv == 'n') {
                if ((rc = next_arg(wk, w, lane, args, &off, 8, &v)))
                    goto out;
                n = 0;
                count++;
            } else { /* unknown conversion: printed as written */
                n = (int)s;
                memcpy(piece, spec, s);
                if (conv)
                    piece[n++] = conv;
            }
        }
        if (n < 0)
            n = 0;
        if ((size_t)n > sizeof piece - 1)
            n = (int)sizeof piece - 1;
        if (text_len + (size_t)n + 1 > text_cap) {
            size_t cap = text_cap ? text_cap * 2 : 256;
            while (cap < text_len + (size_t)n + 1)
                cap *= 2;
            char *t = realloc(text, cap);
            if (!t)
                goto out;
            text = t;
            text_cap = cap;
        }
        memcpy(text + text_len, piece, (size_t)n);
        text_len += (size_t)n;
    }
    cr__out_append(wk, text, text_len);
out:
    free(fmt);
    free(str);
    free(text);
    return rc ? -1 : count;
}
#pragma GCC diagnostic pop

int cr__assertfail(cr__worker_t *wk, cr__warp_t *w, uint32_t lane, uint64_t msg, uint64_t file,
                   uint32_t line, uint64_t func)
{
    char m[512] = "?", f[512] = "?", fn[512] = "?", text[1800];
    if (msg)
        cr__read_string(wk, w, lane, msg, m, sizeof m);
    if (file)
        cr__read_string(wk, w, lane, file, f, sizeof f);
    if (func)
        cr__read_string(wk, w, lane, func, fn, sizeof fn);
    if (wk->fault)
        return wk->fault;
    const uint64_t *R = w->R;
    int n = snprintf(text, sizeof text,
                     "%s:%u: %s: block: [%u,%u,%u], thread: [%u,%u,%u] Assertion `%s` failed.\n", f,
                     line, fn, wk->ctaid[0], wk->ctaid[1], wk->ctaid[2],
                     (unsigned)R[CR__SLOT_TID_X * CR__WARP_SIZE + lane],
                     (unsigned)R[CR__SLOT_TID_Y * CR__WARP_SIZE + lane],
                     (unsigned)R[CR__SLOT_TID_Z * CR__WARP_SIZE + lane], m);
    if (n > 0)
        cr__out_append(wk, text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
    return 0;
}
