/* PTX tokens and numeric literals (see ptx_lex.h). Trusts nothing in the text: every read
 * is checked against the end, and numbers against their ranges. */
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ptx_lex.h"

/* Bound for a decimal float literal's text: far longer than any real one. */
#define FLOAT_TEXT_MAX 80

/* ---- tokens ---- */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

void cr__ptx_lex_init(cr__ptx_lex_t *lx, const char *text, size_t len)
{
    lx->p = text;
    lx->end = text + (len > UINT32_MAX ? UINT32_MAX : len);
    lx->line = 1;
    lx->error = NULL;
    cr__ptx_next(lx);
}

/* Skips blanks, newlines and comments (an unterminated block comment runs to the end);
 * returns 1 when something was skipped. */
static int skip_blank(cr__ptx_lex_t *lx)
{
    const char *start = lx->p;

    while (lx->p < lx->end) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (is_space(c)) {
            lx->p++;
        } else if (c == '/' && lx->end - lx->p >= 2 && lx->p[1] == '/') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->end - lx->p >= 2 && lx->p[1] == '*') {
            lx->p += 2;
            while (lx->p < lx->end && !(*lx->p == '*' && lx->end - lx->p >= 2 && lx->p[1] == '/')) {
                lx->line += *lx->p == '\n';
                lx->p++;
            }
            lx->p = lx->p < lx->end ? lx->p + 2 : lx->end;
        } else {
            break;
        }
    }
    return lx->p != start;
}

/* 0x.., 0f.., 0d.., 0b..: hex digits, where an 'e' is no exponent. */
static int has_radix_prefix(const char *s, const char *end)
{
    return end - s >= 2 && s[0] == '0' && s[1] && strchr("xXfFdDbB", s[1]);
}

/* The end of the word or number starting at s. */
static const char *word_end(const char *s, const char *end)
{
    int directive = *s == '.', number = is_digit(*s);
    const char *q = s + 1;

    for (;;) {
        while (q < end && is_word_char(*q) && !(directive && *q == '.'))
            q++;
        if (end - q > 2 && q[0] == ':' && q[1] == ':' && is_word_char(q[2])) {
            q += 2; /* a "::" qualifier inside the word */
            continue;
        }
        if (number && end - q > 1 && (q[-1] == 'e' || q[-1] == 'E') &&
            (q[0] == '+' || q[0] == '-') && is_digit(q[1]) && !has_radix_prefix(s, end)) {
            q++; /* an exponent sign inside a decimal number: 1.5e-3 */
            continue;
        }
        return q;
    }
}

/* A string on one line; an unterminated one ends with the line. */
static void lex_string(cr__ptx_lex_t *lx)
{
    const char *q = lx->p + 1;

    while (q < lx->end && *q != '"' && *q != '\n' && *q) {
        if (*q == '\\' && q + 1 < lx->end && q[1] && q[1] != '\n')
            q++;
        q++;
    }
    lx->tok.kind = CR__PTX_STR;
    lx->tok.s = lx->p + 1;
    lx->tok.len = (uint32_t)(q - lx->p - 1);
    lx->p = q < lx->end && *q == '"' ? q + 1 : q;
}

void cr__ptx_next(cr__ptx_lex_t *lx)
{
    cr__ptx_tok_t *t = &lx->tok;
    char c;

    t->glued = !skip_blank(lx);
    t->line = lx->line;
    t->s = lx->p;
    t->len = 0;
    if (lx->p >= lx->end || *lx->p == 0) {
        t->kind = CR__PTX_EOF;
        return;
    }
    c = *lx->p;
    if (is_word_char(c)) {
        const char *q = word_end(lx->p, lx->end);
        t->kind = is_digit(c) ? CR__PTX_NUM : CR__PTX_WORD;
        t->len = (uint32_t)(q - lx->p);
        lx->p = q;
    } else if (c == '"') {
        lex_string(lx);
    } else {
        t->kind = CR__PTX_PUNCT;
        t->len = 1;
        lx->p++;
    }
}

int cr__ptx_is(const cr__ptx_tok_t *t, const char *word)
{
    size_t n = strlen(word);
    return (t->kind == CR__PTX_WORD || t->kind == CR__PTX_NUM) && t->len == n &&
           memcmp(t->s, word, n) == 0;
}

int cr__ptx_punct(const cr__ptx_tok_t *t, char c)
{
    return t->kind == CR__PTX_PUNCT && t->s[0] == c;
}

int cr__ptx_is_name(const cr__ptx_tok_t *t)
{
    return t->kind == CR__PTX_WORD && t->s[0] != '.';
}

int cr__ptx_fail(cr__ptx_lex_t *lx, int rc, const char *why)
{
    if (!lx->error)
        lx->error = why; /* the first, innermost reason is the precise one */
    return rc;
}

/* The reason for a missing punctuation c. */
static const char *expected(char c)
{
    switch (c) {
    case ')':
        return "expected ')'";
    case ']':
        return "expected ']'";
    case '}':
        return "expected '}'";
    case ';':
        return "expected ';'";
    default:
        return "unexpected token";
    }
}

int cr__ptx_expect(cr__ptx_lex_t *lx, char c)
{
    if (!cr__ptx_punct(&lx->tok, c))
        return cr__ptx_fail(lx, CR_ECORRUPT, expected(c));
    cr__ptx_next(lx);
    return 0;
}

int cr__ptx_skip_parens(cr__ptx_lex_t *lx)
{
    unsigned depth = 0;

    do {
        if (lx->tok.kind == CR__PTX_EOF)
            return cr__ptx_fail(lx, CR_ECORRUPT, "unclosed '('");
        if (cr__ptx_punct(&lx->tok, '('))
            depth++;
        else if (cr__ptx_punct(&lx->tok, ')'))
            depth--;
        cr__ptx_next(lx);
    } while (depth);
    return 0;
}

/* ---- literals ---- */

static int digit_value(char c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return 99;
}

/* Digits of s[0..len) in base; PTX literals are 64-bit, so more is an error. */
static int parse_digits(const char *s, size_t len, unsigned base, uint64_t *v)
{
    *v = 0;
    if (len == 0)
        return CR_ECORRUPT;
    for (size_t i = 0; i < len; i++) {
        int d = digit_value(s[i]);
        if (d >= (int)base || *v > (UINT64_MAX - (unsigned)d) / base)
            return CR_ECORRUPT;
        *v = *v * base + (unsigned)d;
    }
    return 0;
}

int cr__ptx_int(const cr__ptx_tok_t *t, uint64_t *v)
{
    const char *s = t->s;
    size_t n = t->len;

    if (t->kind != CR__PTX_NUM)
        return CR_ECORRUPT;
    if (n > 1 && (s[n - 1] == 'U' || s[n - 1] == 'u'))
        n--;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        return parse_digits(s + 2, n - 2, 16, v);
    if (n > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
        return parse_digits(s + 2, n - 2, 2, v);
    if (n > 1 && s[0] == '0')
        return parse_digits(s + 1, n - 1, 8, v);
    return parse_digits(s, n, 10, v);
}

/* Decimal floating-point literal (1.5, 2e3) through strtod on a bounded copy. The copy uses
 * the locale's decimal point: the client runs inside applications that set one. */
static int parse_decimal_float(const cr__ptx_tok_t *t, uint64_t *bits)
{
    char buf[FLOAT_TEXT_MAX], *endp, *dot;
    double d;

    if (t->len >= sizeof buf)
        return CR_ECORRUPT;
    memcpy(buf, t->s, t->len);
    buf[t->len] = 0;
    dot = strchr(buf, '.');
    if (dot && localeconv()->decimal_point[0])
        *dot = localeconv()->decimal_point[0];
    d = strtod(buf, &endp);
    if (*endp)
        return CR_ECORRUPT;
    memcpy(bits, &d, sizeof d);
    return 0;
}

int cr__ptx_number(const cr__ptx_tok_t *t, cr__ptx_num_t *n)
{
    const char *s = t->s;

    n->bits = 0;
    if (t->kind != CR__PTX_NUM)
        return CR_ECORRUPT;
    if (t->len == 10 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F')) {
        n->kind = CR__PTX_F32;
        return parse_digits(s + 2, 8, 16, &n->bits);
    }
    if (t->len == 18 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D')) {
        n->kind = CR__PTX_F64;
        return parse_digits(s + 2, 16, 16, &n->bits);
    }
    if (memchr(s, '.', t->len) || (!(t->len > 1 && (s[1] == 'x' || s[1] == 'X')) &&
                                   (memchr(s, 'e', t->len) || memchr(s, 'E', t->len)))) {
        n->kind = CR__PTX_F64;
        return parse_decimal_float(t, &n->bits);
    }
    n->kind = CR__PTX_INT;
    return cr__ptx_int(t, &n->bits);
}

int cr__ptx_count(cr__ptx_lex_t *lx, uint64_t max, uint64_t *v)
{
    if (cr__ptx_int(&lx->tok, v) != 0)
        return CR_ECORRUPT;
    if (*v > max)
        return CR_ETOOBIG;
    cr__ptx_next(lx);
    return 0;
}
