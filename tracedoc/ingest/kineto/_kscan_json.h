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

/* A string at s->p (the opening quote); on success s->p is past the closing quote, start and stop span the
 * quotes included, *esc tells whether it holds an escape. Validates UTF-8 and escapes. */
static int scan_string(Scan *s, Py_ssize_t *start, Py_ssize_t *stop, int *esc) {
    const unsigned char *p = s->p + 1, *end = s->end;
    *esc = 0;
    *start = s->p - s->base;
    for (;;) {
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

/* A JSON number at s->p; *is_int when it has neither fraction nor exponent. */
static int scan_number(Scan *s, int *is_int) {
    const unsigned char *p = s->p, *end = s->end;
    *is_int = 1;
    if (p < end && *p == '-') p++;
    if (p >= end) return FAIL;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < end && *p >= '0' && *p <= '9') p++; }
    else return FAIL;
    if (p < end && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return FAIL;
        while (p < end && *p >= '0' && *p <= '9') p++;
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
