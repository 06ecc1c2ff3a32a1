/* A compiled scan of one chunk of Kineto events (a JSON array of event objects) into columns.
 *
 * scan(data) (or scan(data, end): data[:end] holds what lies between the array's brackets, spans then
 * counting from data's start) returns None ("declined") whenever the chunk holds anything this scan is not sure to read
 * exactly as the msgspec decoder does (decode.py): a syntax error, invalid UTF-8, a control character
 * in a string, a lone surrogate escape, an escape in a key, a known key twice in one object, an entry
 * that is not an object, an ``args`` that is neither an object nor null, a number out of float range,
 * nesting deeper than 64 levels. The caller then decodes the chunk with msgspec; correctness rests on
 * that path, this one only reads the common case faster.
 *
 * Otherwise it returns (n, fields, tags, a, b, times, triples, distinct):
 *   fields    the number of fields per event, in the order of FIELD_KEYS below;
 *   tags      a list of one column per field: n bytes, what the field held in each event (T_* below), or
 *             None where no event of the chunk has the field;
 *   a, b      lists of columns likewise, n int64 each: T_INT the value; T_FLOAT the double's bits; T_STR
 *             a code into ``distinct``; T_RAW* the value's byte span [a, b) in ``data`` (b is None where
 *             no span was needed);
 *   times     n * 2 int64: ts and dur scaled to nanoseconds where their tag is T_RAW_NUM;
 *   triples   n * 6 int64: grid and block [x, y, z] where their tag is T_RAW_TRIPLE (or None);
 *   distinct  the distinct strings of the chunk: str, or the raw JSON text (bytes, quotes included) of
 *             a string with escapes, for the caller to decode; and the text (str) of the raw values of
 *             Input Dims, Input type and Concrete Inputs (T_RAW_TEXT: a is its code, b its length).
 * Uses the CPython API only; the JSON syntax helpers are in _kscan_json.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { T_ABSENT, T_NULL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STR, T_RAW, T_RAW_TRIPLE, T_RAW_NUM, T_RAW_TEXT };
/* what a distinct string stands for: a string without escapes, one with escapes, a raw value's text */
enum { D_PLAIN, D_ESCAPED, D_TEXT };
enum { K_ANY, K_RAW, K_TIME, K_TRIPLE, K_ARGS };

static const char *FIELD_KEYS[] = {
    "ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args",
    "External id", "external id", "correlation", "device", "stream", "grid", "block", "registers per thread",
    "shared memory", "blocks per SM", "warps per SM", "est. achieved occupancy %", "bytes", "cbid", "Call stack",
    "graph id", "Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved", "Addr",
    "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Name",
    "Process Group Ranks", "Seq", "seq", "wait_on_stream", "name", "labels", "Input Dims", "Input type",
    "Concrete Inputs", "flops"};
#define NF ((int)(sizeof(FIELD_KEYS) / sizeof(FIELD_KEYS[0])))
#define N_EVENT_FIELDS 9
#define F_TS 5
#define F_DUR 6
#define F_ARGS 8
#define F_GRID 14
#define F_BLOCK 15
#define MAX_DEPTH 64

static int field_kind(int f) {
    if (f == F_TS || f == F_DUR) return K_TIME;
    if (f == F_ARGS) return K_ARGS;
    if (f == F_GRID || f == F_BLOCK) return K_TRIPLE;
    if (f >= 43) return f == 46 ? K_ANY : K_RAW; /* Input Dims, Input type, Concrete Inputs; flops */
    return K_ANY;
}

typedef struct { Py_ssize_t off, len; } Span;

typedef struct {
    const unsigned char *base, *p, *end;
    /* per-field columns of cap rows, allocated when the field first shows (zero: T_ABSENT) */
    Py_ssize_t n, cap;
    uint8_t *tags[NF];
    int64_t *a[NF], *b[NF], *times, *tri;
    /* distinct strings: spans into base, with a hash table of indexes */
    Span *dist;
    uint8_t *dist_esc;
    Py_ssize_t nd, dcap;
    Py_ssize_t *htab;
    Py_ssize_t hcap;
    Py_ssize_t floats; /* T_FLOAT values whose text is still to be converted */
} Scan;
#define FLOAT_TEXT_MAX 64

#define FAIL (-1)

#include "_kscan_json.h"

/* A hash of n bytes, 8 at a time (names run to hundreds of bytes): each word mixed in with a multiply and
 * a rotation, the tail bytes one at a time, then the high bits folded down (the table takes the low ones).
 * Only the table's layout depends on it: a string's code is its order of first appearance. */
static uint64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h = (h << 31) | (h >> 33);
    }
    for (; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ULL;
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 32);
}

static int grow_table(Scan *s) {
    Py_ssize_t cap = s->hcap ? s->hcap * 2 : 1024;
    Py_ssize_t *t = PyMem_RawMalloc(cap * sizeof(Py_ssize_t));
    if (!t) return FAIL;
    for (Py_ssize_t i = 0; i < cap; i++) t[i] = -1;
    for (Py_ssize_t k = 0; k < s->nd; k++) {
        uint64_t h = hash_bytes(s->base + s->dist[k].off, s->dist[k].len) & (cap - 1);
        while (t[h] >= 0) h = (h + 1) & (cap - 1);
        t[h] = k;
    }
    PyMem_RawFree(s->htab);
    s->htab = t;
    s->hcap = cap;
    return 0;
}

/* The code of the string spanning [a, b) (quotes included). */
static int64_t intern(Scan *s, Py_ssize_t a, Py_ssize_t b, int esc) {
    if (2 * (s->nd + 1) > s->hcap && grow_table(s)) return FAIL;
    const unsigned char *p = s->base + a;
    Py_ssize_t n = b - a;
    uint64_t h = hash_bytes(p, n) & (s->hcap - 1);
    while (s->htab[h] >= 0) {
        Span *d = &s->dist[s->htab[h]];
        if (d->len == n && s->dist_esc[s->htab[h]] == esc && !memcmp(s->base + d->off, p, n)) return s->htab[h];
        h = (h + 1) & (s->hcap - 1);
    }
    if (s->nd == s->dcap) {
        Py_ssize_t cap = s->dcap ? s->dcap * 2 : 256;
        Span *d = PyMem_RawRealloc(s->dist, cap * sizeof(Span));
        if (!d) return FAIL;
        s->dist = d;
        uint8_t *e = PyMem_RawRealloc(s->dist_esc, cap);
        if (!e) return FAIL;
        s->dist_esc = e;
        s->dcap = cap;
    }
    s->dist[s->nd].off = a;
    s->dist[s->nd].len = n;
    s->dist_esc[s->nd] = (uint8_t)esc;
    s->htab[h] = s->nd;
    return s->nd++;
}

/* Time text (microseconds) to round(value * 1000), half away from zero on the first dropped digit, as
 * model.numbers.decimal_text_to_scaled_int does; 0 when done, 1 when the text is left to that function. */
static int scaled_time(const unsigned char *p, const unsigned char *end, int64_t *out) {
    int neg = 0;
    if (*p == '-') { neg = 1; p++; }
    const unsigned char *q = digits_end(p, end);
    if (q - p > 16) return 1; /* beyond int64 once scaled: left to it */
    int64_t ip = digits_value(p, q - p);
    p = q;
    if (ip > (INT64_MAX - 999) / 1000) return 1;
    int64_t frac = 0;
    int round = 0;
    if (p < end && *p == '.') {
        p++;
        int k = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (k < 3) frac = frac * 10 + (*p - '0');
            else if (k == 3) round = *p >= '5';
            k++;
            p++;
        }
        for (; k < 3; k++) frac *= 10;
    }
    if (p != end) return 1; /* an exponent */
    int64_t v = ip * 1000 + frac + round;
    *out = neg ? -v : v;
    return 0;
}

static void *column(void **col, Py_ssize_t cap, size_t size) {
    if (!*col) *col = PyMem_RawCalloc(cap, size);
    return *col;
}

#define TAGS(s, f) ((uint8_t *)column((void **)&(s)->tags[f], (s)->cap, 1))
#define COL_A(s, f) ((int64_t *)column((void **)&(s)->a[f], (s)->cap, 8))
#define COL_B(s, f) ((int64_t *)column((void **)&(s)->b[f], (s)->cap, 8))

/* Field f of the current row holds tag (and value a, b). */
static int put(Scan *s, int f, int tag, int64_t a, int64_t b, int with_b) {
    uint8_t *t = TAGS(s, f);
    int64_t *ca = COL_A(s, f);
    if (!t || !ca) return FAIL;
    t[s->n] = (uint8_t)tag;
    ca[s->n] = a;
    if (with_b) {
        int64_t *cb = COL_B(s, f);
        if (!cb) return FAIL;
        cb[s->n] = b;
    }
    return 0;
}

/* The value of field f of the current event at s->p. */
static int read_field(Scan *s, int f, int depth) {
    int kind = field_kind(f);
    const unsigned char *start = s->p;
    if (s->p >= s->end) return FAIL;
    unsigned char c = *s->p;
    if (kind != K_ANY) {
        if (kind == K_ARGS) return FAIL; /* handled by the caller */
        if (skip_value(s, depth)) return FAIL;
        int tag = T_RAW;
        if (kind == K_RAW) { /* its text, as a code into the distinct strings, and its length */
            int64_t code = intern(s, start - s->base, s->p - s->base, D_TEXT);
            if (code < 0) return FAIL;
            return put(s, f, T_RAW_TEXT, code, s->p - start, 1);
        }
        if (kind == K_TIME && (c == '-' || (c >= '0' && c <= '9'))) {
            int64_t v;
            if (!scaled_time(start, s->p, &v)) {
                s->times[s->n * 2 + (f == F_DUR)] = v;
                tag = T_RAW_NUM;
            }
        } else if (kind == K_TRIPLE && c == '[') {
            /* [int, int, int] of at most 18 digits each */
            const unsigned char *p = start + 1, *end = s->p;
            int64_t v[3];
            int k = 0;
            for (; k < 3; k++) {
                while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
                int neg = 0, nd = 0;
                int64_t x = 0;
                if (p < end && *p == '-') { neg = 1; p++; }
                while (p < end && *p >= '0' && *p <= '9') { x = x * 10 + (*p - '0'); p++; nd++; }
                if (nd == 0 || nd > 18) break;
                v[k] = neg ? -x : x;
                while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
                if (p < end && *p == (k < 2 ? ',' : ']')) p++;
                else break;
            }
            if (k == 3 && p == end) {
                int64_t *t = column((void **)&s->tri, s->cap, 48);
                if (!t) return FAIL;
                t += s->n * 6 + (f == F_BLOCK) * 3;
                t[0] = v[0]; t[1] = v[1]; t[2] = v[2];
                tag = T_RAW_TRIPLE;
            }
        }
        return put(s, f, tag, start - s->base, s->p - s->base, 1);
    }
    if (c == '"') {
        Py_ssize_t a, b; int esc;
        if (scan_string(s, &a, &b, &esc)) return FAIL;
        int64_t code = intern(s, a, b, esc ? D_ESCAPED : D_PLAIN);
        if (code < 0) return FAIL;
        return put(s, f, T_STR, code, 0, 0);
    }
    if (c == '{' || c == '[') {
        if (skip_value(s, depth)) return FAIL;
        return put(s, f, T_RAW, start - s->base, s->p - s->base, 1);
    }
    if (c == 't') return match_lit(s, "true", 4) || put(s, f, T_TRUE, 0, 0, 0);
    if (c == 'f') return match_lit(s, "false", 5) || put(s, f, T_FALSE, 0, 0, 0);
    if (c == 'n') return match_lit(s, "null", 4) || put(s, f, T_NULL, 0, 0, 0);
    int is_int;
    if (scan_number(s, &is_int)) return FAIL;
    Py_ssize_t len = s->p - start;
    if (is_int && len - (*start == '-') <= 18) {
        const unsigned char *p = start + (*start == '-');
        int64_t x = digits_value(p, s->p - p);
        return put(s, f, T_INT, *start == '-' ? -x : x, 0, 0);
    }
    if (is_int) /* a wide integer: the caller decodes its text */
        return put(s, f, T_RAW, start - s->base, s->p - s->base, 1);
    /* A float's text is converted once the scan holds the GIL again (resolve_floats): Python's
     * correctly rounded string-to-double is not safe to run without it. Until then a holds its span. */
    if (len >= FLOAT_TEXT_MAX) return FAIL;
    s->floats++;
    return put(s, f, T_FLOAT, ((start - s->base) << 6) | len, 0, 0);
}

/* Each T_FLOAT's span to the bits of its double, holding the GIL; FAIL (declined) for text out of
 * float range, which msgspec refuses. */
static int resolve_floats(Scan *s) {
    char buf[FLOAT_TEXT_MAX];
    for (int f = 0; f < NF && s->floats; f++) {
        uint8_t *t = s->tags[f];
        if (!t) continue;
        for (Py_ssize_t i = 0; i < s->n; i++) {
            if (t[i] != T_FLOAT) continue;
            int64_t span = s->a[f][i];
            Py_ssize_t len = span & 63;
            memcpy(buf, s->base + (span >> 6), len);
            buf[len] = 0;
            double d = PyOS_string_to_double(buf, NULL, NULL);
            if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return FAIL; }
            if (!(d - d == 0.0)) return FAIL; /* out of float range: msgspec refuses it */
            memcpy(&s->a[f][i], &d, sizeof(d));
            s->floats--;
        }
    }
    return 0;
}

static size_t KEY_LEN[NF];
/* per first byte, the fields whose key starts with it (a bit each: NF < 64) */
static uint64_t FIRST_BYTE[256];
typedef char nf_fits_in_a_word[NF < 64 ? 1 : -1]; /* the bit masks here and in scan_object */

static inline int lowest_bit(uint64_t m) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(m);
#else
    int f = 0;
    while (!(m & 1)) { m >>= 1; f++; }
    return f;
#endif
}

/* The field in FIELD_KEYS[lo:hi] whose key is the string spanning [a, b) (quotes included), the first one
 * if two share it; -1 if none. Only the keys with the string's first byte are compared. */
static int key_index(Scan *s, Py_ssize_t a, Py_ssize_t b, int lo, int hi) {
    const char *k = (const char *)s->base + a + 1;
    size_t n = (size_t)(b - a - 2);
    if (n == 0) return -1;
    uint64_t m = FIRST_BYTE[(unsigned char)k[0]] & (((1ULL << hi) - 1) & ~((1ULL << lo) - 1));
    while (m) {
        int f = lowest_bit(m);
        if (KEY_LEN[f] == n && !memcmp(FIELD_KEYS[f], k, n)) return f;
        m &= m - 1;
    }
    return -1;
}

/* An object at s->p whose known keys are FIELD_KEYS[lo:hi]. */
static int scan_object(Scan *s, int lo, int hi, int depth) {
    uint64_t seen = 0;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') { s->p++; return 0; }
    for (;;) {
        skip_ws(s);
        Py_ssize_t a, b; int esc;
        if (s->p >= s->end || *s->p != '"' || scan_string(s, &a, &b, &esc) || esc) return FAIL;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return FAIL;
        s->p++;
        skip_ws(s);
        int f = key_index(s, a, b, lo, hi);
        if (f < 0) {
            if (skip_value(s, depth + 1)) return FAIL;
        } else {
            if (seen & (1ULL << f)) return FAIL; /* a key twice */
            seen |= 1ULL << f;
            if (f == F_ARGS) {
                if (s->p < s->end && *s->p == '{') {
                    if (put(s, f, T_RAW, 0, 0, 0) || scan_object(s, N_EVENT_FIELDS, NF, depth + 1)) return FAIL;
                } else if (!match_lit(s, "null", 4)) {
                    if (put(s, f, T_NULL, 0, 0, 0)) return FAIL;
                } else {
                    return FAIL; /* args of another type: the other path counts and drops it */
                }
            } else if (read_field(s, f, depth + 1)) {
                return FAIL;
            }
        }
        skip_ws(s);
        if (s->p >= s->end) return FAIL;
        if (*s->p == ',') { s->p++; continue; }
        if (*s->p == '}') { s->p++; return 0; }
        return FAIL;
    }
}

static int grow_column(void **col, Py_ssize_t old, Py_ssize_t cap, size_t size) {
    if (!*col) return 0;
    char *c = PyMem_RawRealloc(*col, cap * size);
    if (!c) return FAIL;
    memset(c + old * size, 0, (cap - old) * size);
    *col = c;
    return 0;
}

static int add_row(Scan *s) {
    if (s->n == s->cap) {
        Py_ssize_t cap = s->cap * 2;
        for (int f = 0; f < NF; f++)
            if (grow_column((void **)&s->tags[f], s->n, cap, 1) || grow_column((void **)&s->a[f], s->n, cap, 8)
                || grow_column((void **)&s->b[f], s->n, cap, 8))
                return FAIL;
        if (grow_column((void **)&s->times, s->n, cap, 16) || grow_column((void **)&s->tri, s->n, cap, 48))
            return FAIL;
        s->cap = cap;
    }
    return 0;
}

/* A JSON array of events; with bare, the text between its brackets (as if they were around it). */
static int scan_all(Scan *s, int bare) {
    s->cap = (s->end - s->base) / 160 + 64; /* rows: events are rarely under 160 bytes */
    if (!column((void **)&s->times, s->cap, 16)) return FAIL;
    skip_ws(s);
    if (!bare) {
        if (s->p >= s->end || *s->p != '[') return FAIL;
        s->p++;
        skip_ws(s);
    }
    if (bare && s->p == s->end) {
        return 0;
    } else if (!bare && s->p < s->end && *s->p == ']') {
        s->p++;
    } else {
        for (;;) {
            skip_ws(s);
            if (s->p >= s->end || *s->p != '{') return FAIL;
            if (add_row(s) || scan_object(s, 0, N_EVENT_FIELDS, 1)) return FAIL;
            s->n++;
            skip_ws(s);
            if (bare && s->p == s->end) break;
            if (s->p >= s->end) return FAIL;
            if (*s->p == ',') { s->p++; continue; }
            if (!bare && *s->p == ']') { s->p++; break; }
            return FAIL;
        }
    }
    skip_ws(s);
    return s->p == s->end ? 0 : FAIL;
}

static PyObject *distinct_list(Scan *s) {
    PyObject *out = PyList_New(s->nd);
    if (!out) return NULL;
    for (Py_ssize_t k = 0; k < s->nd; k++) {
        const char *p = (const char *)s->base + s->dist[k].off;
        Py_ssize_t n = s->dist[k].len;
        int kind = s->dist_esc[k];
        PyObject *v = kind == D_ESCAPED ? PyBytes_FromStringAndSize(p, n)
                      : PyUnicode_DecodeUTF8(p + (kind == D_PLAIN), n - 2 * (kind == D_PLAIN), "strict");
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, k, v);
    }
    return out;
}

static void release(Scan *s) {
    for (int f = 0; f < NF; f++) { PyMem_RawFree(s->tags[f]); PyMem_RawFree(s->a[f]); PyMem_RawFree(s->b[f]); }
    PyMem_RawFree(s->times); PyMem_RawFree(s->tri);
    PyMem_RawFree(s->dist); PyMem_RawFree(s->dist_esc); PyMem_RawFree(s->htab);
}

/* bytes of the first n rows of a column, or None where the field never showed */
static PyObject *column_bytes(void *col, Py_ssize_t n, size_t size) {
    if (!col) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(col, n * size);
}

static PyObject *columns(Scan *s, int which) {
    PyObject *out = PyList_New(NF);
    if (!out) return NULL;
    for (int f = 0; f < NF; f++) {
        void *col = which == 0 ? (void *)s->tags[f] : which == 1 ? (void *)s->a[f] : (void *)s->b[f];
        PyObject *v = column_bytes(col, s->n, which == 0 ? 1 : 8);
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, f, v);
    }
    return out;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *arg;
    Py_ssize_t end = -1;
    if (!PyArg_ParseTuple(args, "O|n", &arg, &end)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    if (end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "end beyond the data");
        return NULL;
    }
    Scan s;
    memset(&s, 0, sizeof(s));
    s.base = s.p = view.buf;
    s.end = s.base + (end >= 0 ? end : view.len);
    /* The scan touches no Python object (its memory is PyMem_Raw*, floats are converted after), so
     * other threads run meanwhile: a reader scans the next chunks while it turns this one into columns. */
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan_all(&s, end >= 0);
    Py_END_ALLOW_THREADS
    if (!failed && s.floats) failed = resolve_floats(&s);
    PyObject *res = NULL;
    if (failed) {
        if (!PyErr_Occurred()) { res = Py_None; Py_INCREF(res); }
    } else {
        PyObject *dist = distinct_list(&s);
        PyObject *tags = columns(&s, 0), *a = columns(&s, 1), *b = columns(&s, 2);
        PyObject *times = column_bytes(s.times, s.n, 16), *tri = column_bytes(s.tri, s.n, 48);
        if (dist && tags && a && b && times && tri)
            res = Py_BuildValue("(nnNNNNNN)", s.n, (Py_ssize_t)NF, tags, a, b, times, tri, dist);
        else {
            Py_XDECREF(dist); Py_XDECREF(tags); Py_XDECREF(a); Py_XDECREF(b); Py_XDECREF(times); Py_XDECREF(tri);
        }
    }
    release(&s);
    PyBuffer_Release(&view);
    return res;
}

static PyObject *field_keys(void) {
    PyObject *t = PyTuple_New(NF);
    if (!t) return NULL;
    for (int f = 0; f < NF; f++) {
        PyObject *k = PyUnicode_FromString(FIELD_KEYS[f]);
        if (!k) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, f, k);
    }
    return t;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "scan(data[, end]): columns of a chunk of Kineto events, a JSON array (with end: "
     "data[:end] is the text inside the array's brackets), or None when declined."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kscan(void) {
    for (int f = 0; f < NF; f++) {
        KEY_LEN[f] = strlen(FIELD_KEYS[f]);
        FIRST_BYTE[(unsigned char)FIELD_KEYS[f][0]] |= 1ULL << f;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *keys = field_keys();
    if (!keys || PyModule_AddObject(m, "FIELD_KEYS", keys)) { Py_XDECREF(keys); Py_DECREF(m); return NULL; }
    /* raised whenever what scan() returns changes meaning, so that a module built from older source is
     * not used (rows.py checks it) */
    if (PyModule_AddIntConstant(m, "FORMAT", 5)) { Py_DECREF(m); return NULL; }
    return m;
}
