/* JSON syntax for _kscan.c: white space, strings (UTF-8 and escapes validated), numbers, literals, and
 * values skipped whole (nesting bounded by MAX_DEPTH). Each returns FAIL on anything that is not valid
 * JSON; included by _kscan.c after its Scan type, FAIL and MAX_DEPTH. */

static inline void skip_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Whether any of the 8 bytes of w needs a look of its own in a string: a quote, a backslash, a control
 * character (below 0x20) or a byte of a multi-byte UTF-8 sequence (0x80 and up). Bit tricks on the
 * word as a whole ("has a zero byte": (x - 0x01..01) & ~x & 0x80..80; "has a byte below n" likewise
 * with n); a false alarm costs only the byte-by-byte path, a miss cannot happen. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline int word_needs_look(uint64_t w) {
    uint64_t quote = w ^ (ONES * '"'), slash = w ^ (ONES * '\\');
    uint64_t zero_quote = (quote - ONES) & ~quote, zero_slash = (slash - ONES) & ~slash;
    uint64_t below_space = (w - ONES * 0x20) & ~w;
    return ((zero_quote | zero_slash | below_space) & HIGHS) != 0 || (w & HIGHS) != 0;
}

/* A string at s->p (the opening quote); on success s->p is past the closing quote, start and stop span the
 * quotes included, *esc tells whether it holds an escape. Validates UTF-8 and escapes. */
static int scan_string(Scan *s, Py_ssize_t *start, Py_ssize_t *stop, int *esc) {
    const unsigned char *p = s->p + 1, *end = s->end;
    *esc = 0;
    *start = s->p - s->base;
    for (;;) {
        while (end - p >= 8) { /* runs of plain ASCII, 8 bytes at a time */
            uint64_t w;
            memcpy(&w, p, 8);
            if (word_needs_look(w)) break;
            p += 8;
        }
        if (p >= end) return FAIL;
        unsigned char c = *p;
        if (c == '"') break;
        if (c < 0x20) return FAIL;
        if (c == '\\') {
            *esc = 1;
            if (p + 1 >= end) return FAIL;
            unsigned char e = p[1];
            if (e == 'u') {
                if (p + 6 > end) return FAIL;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int h = hexval(p[k]);
                    if (h < 0) return FAIL;
                    v = v * 16 + h;
                }
                if (v >= 0xDC00 && v <= 0xDFFF) return FAIL; /* a lone low surrogate: left to the other path */
                if (v >= 0xD800 && v <= 0xDBFF) { /* a high surrogate: a low one must follow */
                    if (p + 12 > end || p[6] != '\\' || p[7] != 'u') return FAIL;
                    int w = 0;
                    for (int k = 8; k < 12; k++) {
                        int h = hexval(p[k]);
                        if (h < 0) return FAIL;
                        w = w * 16 + h;
                    }
                    if (w < 0xDC00 || w > 0xDFFF) return FAIL;
                    p += 6;
                }
                p += 6;
                continue;
            }
            if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't'))
                return FAIL;
            p += 2;
            continue;
        }
        if (c < 0x80) { p++; continue; }
        int need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xEE && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else return FAIL;
        if (p + need >= end) return FAIL;
        if (p[1] < lo || p[1] > hi) return FAIL;
        for (int k = 2; k <= need; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return FAIL;
        p += need + 1;
    }
    s->p = p + 1;
    *stop = s->p - s->base;
    return 0;
}

/* Whether the 8 bytes at p are all ASCII digits (each byte's high nibble is 3 and, plus 6, stays so). */
static inline int eight_digits(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return ((w & 0xF0F0F0F0F0F0F0F0ULL) | (((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ==
           0x3333333333333333ULL;
}

/* Past the run of ASCII digits at p (8 at a time while they last). */
static inline const unsigned char *digits_end(const unsigned char *p, const unsigned char *end) {
    while (end - p >= 8 && eight_digits(p)) p += 8;
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

/* The value of the n ASCII digits at p (n <= 18: no overflow); 8 at a time where bytes are little-endian. */
static inline int64_t digits_value(const unsigned char *p, Py_ssize_t n) {
    int64_t x = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v -= 0x3030303030303030ULL;               /* eight digits, the first in the lowest byte */
        v = (v * 10) + (v >> 8);                  /* pairs: 10 * d0 + d1 in bytes 0, 2, 4, 6 */
        v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
             (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
        x = x * 100000000 + (int64_t)v;
    }
#endif
    for (; n > 0; n--, p++) x = x * 10 + (*p - '0');
    return x;
}

/* A JSON number at s->p; *is_int when it has neither fraction nor exponent. */
static int scan_number(Scan *s, int *is_int) {
    const unsigned char *p = s->p, *end = s->end;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return FAIL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') p = digits_end(p, end);
    else return FAIL;
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        p = digits_end(p, end);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        p = digits_end(p, end);
    }
    s->p = p;
    return 0;
}

static int skip_value(Scan *s, int depth);

static int skip_container(Scan *s, int depth, unsigned char close) {
    if (depth > MAX_DEPTH) return FAIL;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) { s->p++; return 0; }
    for (;;) {
        skip_ws(s);
        if (close == '}') {
            Py_ssize_t a, b; int esc;
            if (s->p >= s->end || *s->p != '"' || scan_string(s, &a, &b, &esc)) return FAIL;
            if (esc) return FAIL; /* an escaped key in a value: msgspec reads it, so do not guess */
            skip_ws(s);
            if (s->p >= s->end || *s->p != ':') return FAIL;
            s->p++;
            skip_ws(s);
        }
        if (skip_value(s, depth + 1)) return FAIL;
        skip_ws(s);
        if (s->p >= s->end) return FAIL;
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == close) { s->p++; return 0; }
        return FAIL;
    }
}

static int match_lit(Scan *s, const char *lit, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n)) return FAIL;
    s->p += n;
    return 0;
}

static int skip_value(Scan *s, int depth) {
    if (s->p >= s->end) return FAIL;
    unsigned char c = *s->p;
    Py_ssize_t a, b; int esc, is_int;
    switch (c) {
    case '{': return skip_container(s, depth, '}');
    case '[': return skip_container(s, depth, ']');
    case '"': return scan_string(s, &a, &b, &esc);
    case 't': return match_lit(s, "true", 4);
    case 'f': return match_lit(s, "false", 5);
    case 'n': return match_lit(s, "null", 4);
    default: return scan_number(s, &is_int);
    }
}
