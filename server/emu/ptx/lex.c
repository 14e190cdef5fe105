/* Tokenizer of PTX text. Words are runs of [A-Za-z0-9_$%.] (with "::" inside, as in
 * ld.global.L1::no_allocate), so an opcode with its modifiers, a directive, a register such as
 * %tid.x and a number (0f3F800000, 1.5e-3) are one token each; everything else is one
 * punctuation character or a string. The text is untrusted: nothing reads past its end. */
#include <string.h>

#include "internal.h"

static int is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%' || c == '.';
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

void cr__lex_init(cr__lex_t *lx, const char *text, size_t len)
{
    lx->p = text;
    lx->end = text + len;
    lx->line = 1;
    cr__lex_next(lx);
}

/* Skips blanks, newlines and comments; returns 1 when something was skipped. */
static int skip_blank(cr__lex_t *lx)
{
    const char *start = lx->p;
    while (lx->p < lx->end) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line++;
            lx->p++;
        } else if (is_space(c) || c == '\0') {
            lx->p++;
        } else if (c == '/' && lx->end - lx->p >= 2 && lx->p[1] == '/') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->end - lx->p >= 2 && lx->p[1] == '*') {
            lx->p += 2;
            while (lx->p < lx->end && !(*lx->p == '*' && lx->end - lx->p >= 2 && lx->p[1] == '/')) {
                if (*lx->p == '\n') lx->line++;
                lx->p++;
            }
            lx->p = lx->p < lx->end ? lx->p + 2 : lx->end;
        } else {
            break;
        }
    }
    return lx->p != start;
}

void cr__lex_next(cr__lex_t *lx)
{
    cr__tok_t *t = &lx->tok;
    int glued = !skip_blank(lx);
    t->glued = glued;
    t->line = lx->line;
    t->s = lx->p;
    if (lx->p >= lx->end) {
        t->kind = CR__TK_EOF;
        t->len = 0;
        return;
    }
    char c = *lx->p;
    if (is_word_char(c)) {
        const char *q = lx->p;
        int numeric = c >= '0' && c <= '9';
        for (;;) {
            while (q < lx->end && is_word_char(*q))
                q++;
            if (q + 2 < lx->end + 0 && q[0] == ':' && q[1] == ':' && is_word_char(q[2])) {
                q += 2; /* a "::" qualifier inside the word */
                continue;
            }
            /* an exponent sign inside a decimal number: 1.5e-3 */
            if (numeric && q + 1 < lx->end && (q[-1] == 'e' || q[-1] == 'E') &&
                (q[0] == '+' || q[0] == '-') && q[1] >= '0' && q[1] <= '9' &&
                !(lx->p[0] == '0' && q - lx->p > 1 &&
                  (lx->p[1] == 'x' || lx->p[1] == 'X' || lx->p[1] == 'f' || lx->p[1] == 'F' ||
                   lx->p[1] == 'd' || lx->p[1] == 'D'))) {
                q++;
                continue;
            }
            break;
        }
        t->kind = CR__TK_WORD;
        t->len = (uint32_t)(q - lx->p);
        lx->p = q;
        return;
    }
    if (c == '"') {
        const char *q = lx->p + 1;
        while (q < lx->end && *q != '"' && *q != '\n') {
            if (*q == '\\' && q + 1 < lx->end) q++;
            q++;
        }
        t->kind = CR__TK_STRING;
        t->s = lx->p + 1;
        t->len = (uint32_t)(q - lx->p - 1);
        lx->p = q < lx->end ? q + 1 : q;
        return;
    }
    t->kind = CR__TK_PUNCT;
    t->len = 1;
    lx->p++;
}

int cr__tok_is(const cr__tok_t *t, const char *word)
{
    size_t n = strlen(word);
    return t->kind == CR__TK_WORD && t->len == n && memcmp(t->s, word, n) == 0;
}

int cr__tok_punct(const cr__tok_t *t, char c)
{
    return t->kind == CR__TK_PUNCT && t->s[0] == c;
}
