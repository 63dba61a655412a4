/*
 * Compiled reader of a plain COCO results file (module aegis_eval.protocols._cresults, beside predictions.py, whose
 * Python reading it mirrors).
 *
 * A results file is a JSON list of detections. This reader takes only the plain form a detector writes: a top-level
 * array of objects, each with exactly the four keys image_id, category_id (integers of at most 18 digits), bbox (an
 * array of four numbers) and score (a number), in any order, keys without escapes, no key twice, and optionally a
 * fifth key file_name (a string, which the columns leave out: only an ambiguous id needs it, and the JSON path
 * settles those). The image ids may instead all be strings (file-name stems: Ultralytics writes the stem of a name
 * that is not a number, and file_name beside it). It turns that into columns without building a Python object per
 * value. Anything else (another key, integer and string ids in one file, a string with an escape, a control
 * character or invalid UTF-8, a boolean, a number out of float64 range, an empty list, bad syntax, a BOM) returns
 * None, and the caller reads the file with the
 * strict JSON reader and the Python checks, which accept it or name the problem; so the columns, when given, are
 * exactly the values that path reads. Numbers are read correctly rounded, as Python's float() reads them (see
 * read_double); a token the C library's strtod does not consume whole (a locale with another decimal point) or
 * reads as out of range returns None too.
 *
 * Python interface:
 *   columns(data: bytes) -> (image_ids, category_ids, boxes, scores, names) | None
 *     int64, int64, float64 (4 per detection, x y w h) and float64 values as native-endian bytes; names is None when
 *     the ids are integers, else the list of distinct string ids in order of first appearance, and image_ids holds
 *     each detection's index into it.
 *   gt_annotations(data: bytes) -> (start, stop, ids, image_ids, category_ids, boxes, areas, crowd) | None
 *     The top-level "annotations" array of a COCO GT in the same plain spirit (keys id, image_id, category_id,
 *     bbox, area, iscrowd; the first three ids required, integers of at most 18 digits; numbers as above): its byte
 *     range [start, stop) and int64 ids (index + 1 where absent), image ids, categories, float64 boxes, areas (NaN
 *     where absent) and uint8 crowd flags (iscrowd != 0). The rest of the document is only skipped over: the caller
 *     parses it as JSON with the array replaced by [], so the whole is valid exactly when that is. None for
 *     anything else (another key, escapes in a key, "annotations" twice, a string id, a boolean).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    const char *end;
} Cursor;

typedef struct {
    int64_t *ids, *cats;
    double *boxes, *scores;
    int64_t *lens; /* string ids: ids holds each string's offset from base, lens its length in bytes */
    Py_ssize_t n, cap;
    const char *base;
    int id_kind; /* 0 none read yet, 1 integers, 2 strings */
} Columns;

static void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* The extent of one JSON number token at c->p (RFC 8259 grammar); 0 when there is none. Sets *integral when
 * the token has neither a fraction nor an exponent. */
static Py_ssize_t number_token(const Cursor *c, int *integral) {
    const char *q = c->p, *end = c->end;
    *integral = 1;
    if (q < end && *q == '-') q++;
    if (q >= end || !is_digit(*q)) return 0;
    if (*q == '0') {
        q++;
    } else {
        while (q < end && is_digit(*q)) q++;
    }
    if (q < end && *q == '.') {
        *integral = 0;
        q++;
        if (q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        *integral = 0;
        q++;
        if (q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    return q - c->p;
}

/* An integer of at most 18 digits (always inside int64). */
static int read_int(Cursor *c, int64_t *out) {
    int integral;
    Py_ssize_t len = number_token(c, &integral);
    if (len == 0 || !integral) return 0;
    const char *q = c->p;
    int negative = *q == '-';
    if (negative) q++;
    if (c->p + len - q > 18) return 0;
    int64_t v = 0;
    for (; q < c->p + len; q++) v = v * 10 + (*q - '0');
    *out = negative ? -v : v;
    c->p += len;
    return 1;
}

/* Powers of ten that are exact doubles. */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number as Python reads its token: float() of a fraction or exponent form, int then float64 of an integer (so
 * "-0" is +0.0, as int("-0") is 0). Clinger's fast path where it is exact: a significand of at most 2**53 and a
 * power of ten within 1e22 are both exact doubles, so one multiplication or division rounds once, correctly;
 * everything else goes to strtod on a NUL-terminated copy, which must consume it whole (correctly rounded too). */
static int read_double(Cursor *c, double *out) {
    int integral;
    Py_ssize_t len = number_token(c, &integral);
    if (len == 0) return 0;
    const char *q = c->p, *end = c->p + len;
    int negative = *q == '-';
    if (negative) q++;
    uint64_t m = 0;
    int digits = 0, exp10 = 0, fast = 1;
    for (; q < end && is_digit(*q); q++) {
        if (m || *q != '0') digits++;
        m = digits <= 19 ? m * 10 + (uint64_t)(*q - '0') : m;
        if (digits > 19) exp10++;
    }
    if (q < end && *q == '.') {
        for (q++; q < end && is_digit(*q); q++) {
            if (m || *q != '0') digits++;
            if (digits <= 19) {
                m = m * 10 + (uint64_t)(*q - '0');
                exp10--;
            }
        }
    }
    if (q < end) { /* the exponent: e or E, an optional sign, digits */
        q++;
        int eneg = 0;
        long e = 0;
        if (*q == '+' || *q == '-') eneg = *q++ == '-';
        for (; q < end; q++) e = e < 100000 ? e * 10 + (*q - '0') : e;
        exp10 += (int)(eneg ? -e : e);
    }
    if (digits > 19 || m > ((uint64_t)1 << 53) || exp10 < -22 || exp10 > 22) fast = 0;
    if (fast) {
        double v = (double)m;
        v = exp10 < 0 ? v / POW10[-exp10] : v * POW10[exp10];
        *out = negative && !(integral && m == 0) ? -v : v;
        c->p += len;
        return 1;
    }
#if defined(__SIZEOF_INT128__)
    /* A significand beyond 2**53 (17 to 19 digits) and a fraction of at most 19 digits (10**k fits 64 bits): the
     * quotient m / 10**k is within about one unit in the last place of the true value; it is taken when exact
     * integer arithmetic shows the true value strictly between the midpoints around it (so it is the correctly
     * rounded double), else strtod decides (ties, a power-of-two boundary, products that would not fit). */
    if (digits <= 19 && exp10 <= 0 && exp10 >= -19 && m > 0) {
        const double x = (double)m / POW10[-exp10];
        int e2;
        const double frac = frexp(x, &e2); /* x = frac * 2**e2, frac in [0.5, 1) */
        const uint64_t M = (uint64_t)ldexp(frac, 53);
        const int E = e2 - 53; /* x = M * 2**E */
        if (M != ((uint64_t)1 << 52) && E < 0 && -E <= 62) {
            const unsigned __int128 scale = (unsigned __int128)(uint64_t)POW10[-exp10];
            const unsigned __int128 value = (unsigned __int128)m << (1 - E); /* 2m * 2**-E */
            const unsigned __int128 lower = (unsigned __int128)(2 * M - 1) * scale;
            const unsigned __int128 upper = (unsigned __int128)(2 * M + 1) * scale;
            if (lower < value && value < upper) {
                *out = negative ? -x : x;
                c->p += len;
                return 1;
            }
        }
    }
#endif
    char buf[64];
    if (len >= (Py_ssize_t)sizeof(buf)) return 0;
    memcpy(buf, c->p, (size_t)len);
    buf[len] = '\0';
    char *stop;
    errno = 0;
    double v = strtod(buf, &stop);
    if (stop != buf + len || errno == ERANGE || !isfinite(v)) return 0;
    *out = integral && v == 0.0 ? 0.0 : v;
    c->p += len;
    return 1;
}

static int expect(Cursor *c, char ch) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != ch) return 0;
    c->p++;
    return 1;
}

/* A bbox: '[' four numbers ']' (whitespace between tokens), into out[0..4); 0 when it is anything else. */
static int read_box(Cursor *c, double *out) {
    if (!expect(c, '[')) return 0;
    for (int k = 0; k < 4; k++) {
        skip_ws(c);
        if (!read_double(c, &out[k]) || !expect(c, k < 3 ? ',' : ']')) return 0;
    }
    return 1;
}

/* The string at c->p, without escapes or control characters: its extent, or 0 (then not the plain form). */
static int plain_string(Cursor *c, const char **start, size_t *len) {
    if (!expect(c, '"')) return 0;
    *start = c->p;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p == '\\' || (unsigned char)*c->p < 0x20) return 0;
        c->p++;
    }
    if (c->p >= c->end) return 0;
    *len = (size_t)(c->p - *start);
    c->p++;
    return 1;
}

/* Which of names[0..count) the plain string at c->p is, or -1 (another name, or not a plain string). */
static int key_index(Cursor *c, const char *const *names, int count) {
    const char *name;
    size_t len;
    if (!plain_string(c, &name, &len)) return -1;
    for (int k = 0; k < count; k++) {
        if (strlen(names[k]) == len && memcmp(names[k], name, len) == 0) return k;
    }
    return -1;
}

/* After a member or an element: 1 when a ',' follows (another comes), 0 when `close` does (consumed), -1 for
 * anything else. */
static int next_item(Cursor *c, char close) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        return 1;
    }
    return expect(c, close) ? 0 : -1;
}

static int grow(Columns *cols) {
    Py_ssize_t cap = cols->cap ? cols->cap * 2 : 4096;
    /* the C allocator, not PyMem: parse runs without the GIL */
    int64_t *ids = realloc(cols->ids, (size_t)cap * sizeof(int64_t));
    if (ids) cols->ids = ids;
    int64_t *cats = realloc(cols->cats, (size_t)cap * sizeof(int64_t));
    if (cats) cols->cats = cats;
    double *boxes = realloc(cols->boxes, (size_t)cap * 4 * sizeof(double));
    if (boxes) cols->boxes = boxes;
    double *scores = realloc(cols->scores, (size_t)cap * sizeof(double));
    if (scores) cols->scores = scores;
    int64_t *lens = realloc(cols->lens, (size_t)cap * sizeof(int64_t));
    if (lens) cols->lens = lens;
    if (!ids || !cats || !boxes || !scores || !lens) return 0;
    cols->cap = cap;
    return 1;
}

/* The keys of a detection (their bits in `seen`: 1, 2, 4, 8 required, 16 optional). */
static const char *const RESULT_KEYS[5] = {"image_id", "category_id", "bbox", "score", "file_name"};

/* Whether p[0..len) is UTF-8 as Python's strict decoder takes it: no overlong form, no surrogate, nothing above
 * U+10FFFF. A string the reader skips must be one the JSON path would read. */
static int utf8_valid(const char *text, size_t len) {
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    while (p < end) {
        unsigned char b = *p;
        size_t n;
        uint32_t cp;
        if (b < 0x80) {
            p++;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            n = 1, cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            n = 2, cp = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            n = 3, cp = b & 0x07;
        } else {
            return 0;
        }
        if ((size_t)(end - p) <= n) return 0;
        for (size_t k = 1; k <= n; k++) {
            if ((p[k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[k] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* Detection i's image_id at c->p: an integer, or a plain string when every id of the file is one (recorded as its
 * extent; distinct_strings numbers them). 0 when it is neither, or not of the kind the first id was. */
static int read_image_id(Cursor *c, Columns *cols, Py_ssize_t i) {
    int kind = c->p < c->end && *c->p == '"' ? 2 : 1;
    if (cols->id_kind && cols->id_kind != kind) return 0;
    cols->id_kind = kind;
    if (kind == 1) return read_int(c, &cols->ids[i]);
    const char *start;
    size_t len;
    if (!plain_string(c, &start, &len)) return 0;
    cols->ids[i] = (int64_t)(start - cols->base);
    cols->lens[i] = (int64_t)len;
    return 1;
}

static uint64_t fnv1a(const char *p, int64_t len) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t k = 0; k < len; k++) h = (h ^ (unsigned char)p[k]) * 0x100000001b3ULL;
    return h;
}

/* String ids: each detection's extent (ids, lens) becomes the index of its string among the distinct ones, numbered
 * in order of first appearance; their extents go to starts[0..*count) and lens[0..*count). 1, or -1 out of memory.
 * A hash table of distinct indexes; consecutive detections of one image skip it. No Python object: no GIL needed. */
static int distinct_strings(Columns *cols, int64_t *starts, Py_ssize_t *count) {
    Py_ssize_t size = 16;
    while (size < 2 * cols->n) size *= 2;
    Py_ssize_t *slots = malloc((size_t)size * sizeof(Py_ssize_t)); /* distinct index + 1; 0 empty */
    if (!slots) return -1;
    memset(slots, 0, (size_t)size * sizeof(Py_ssize_t));
    Py_ssize_t m = 0;
    int64_t prev_start = -1, prev_len = -1, prev_index = -1;
    for (Py_ssize_t i = 0; i < cols->n; i++) {
        int64_t start = cols->ids[i], len = cols->lens[i];
        const char *p = cols->base + start;
        if (len == prev_len && memcmp(p, cols->base + prev_start, (size_t)len) == 0) {
            cols->ids[i] = prev_index;
            continue;
        }
        Py_ssize_t slot = (Py_ssize_t)(fnv1a(p, len) & (uint64_t)(size - 1));
        for (;; slot = (slot + 1) & (size - 1)) {
            Py_ssize_t d = slots[slot] - 1;
            if (d < 0) { /* a new string; lens[0..m) is free: every entry below i was read already */
                slots[slot] = m + 1;
                starts[m] = start;
                cols->lens[m] = len;
                d = m++;
            } else if (cols->lens[d] != len || memcmp(cols->base + starts[d], p, (size_t)len) != 0) {
                continue;
            }
            prev_start = start, prev_len = len, prev_index = d;
            cols->ids[i] = d;
            break;
        }
    }
    free(slots);
    *count = m;
    return 1;
}

/* 1: parsed; 0: not the plain form; -1: out of memory. Touches no Python object: it runs without the GIL. */
static int parse(Cursor *c, Columns *cols) {
    if (!expect(c, '[')) return 0;
    int more_items;
    do {
        if (cols->n == cols->cap && !grow(cols)) return -1;
        Py_ssize_t i = cols->n;
        if (!expect(c, '{')) return 0;
        int seen = 0, more_members;
        do {
            int key = key_index(c, RESULT_KEYS, 5);
            if (key < 0 || (seen & (1 << key)) || !expect(c, ':')) return 0;
            seen |= 1 << key;
            skip_ws(c);
            int ok;
            if (key == 0) {
                ok = read_image_id(c, cols, i);
            } else if (key == 1) {
                ok = read_int(c, &cols->cats[i]);
            } else if (key == 3) {
                ok = read_double(c, &cols->scores[i]);
            } else if (key == 4) {
                const char *name;
                size_t len;
                ok = plain_string(c, &name, &len) && utf8_valid(name, len);
            } else {
                ok = read_box(c, &cols->boxes[4 * i]);
            }
            if (!ok || (more_members = next_item(c, '}')) < 0) return 0;
        } while (more_members);
        if ((seen & 15) != 15) return 0;
        cols->n++;
        if ((more_items = next_item(c, ']')) < 0) return 0;
    } while (more_items);
    skip_ws(c);
    return c->p == c->end;
}

/* The distinct string ids as a list of str; NULL with no exception when one is not valid UTF-8 (the JSON path
 * then names the problem), NULL with one when out of memory. */
static PyObject *string_list(const char *base, const int64_t *starts, const int64_t *lens, Py_ssize_t count) {
    PyObject *names = PyList_New(count);
    if (!names) return NULL;
    for (Py_ssize_t d = 0; d < count; d++) {
        PyObject *name = PyUnicode_DecodeUTF8(base + starts[d], (Py_ssize_t)lens[d], "strict");
        if (!name) {
            Py_DECREF(names);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
            return NULL;
        }
        PyList_SET_ITEM(names, d, name);
    }
    return names;
}

static PyObject *py_columns(PyObject *self, PyObject *args) {
    Py_buffer buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    Columns cols = {NULL, NULL, NULL, NULL, NULL, 0, 0, (const char *)buf.buf, 0};
    Cursor c = {(const char *)buf.buf, (const char *)buf.buf + buf.len};
    int64_t *starts = NULL;
    Py_ssize_t count = 0;
    int status;
    /* the buffer stays held while the GIL is released, so a sweep's files parse side by side on threads */
    Py_BEGIN_ALLOW_THREADS;
    status = parse(&c, &cols);
    if (status == 1 && cols.id_kind == 2) {
        starts = malloc((size_t)cols.n * sizeof(int64_t));
        status = starts ? distinct_strings(&cols, starts, &count) : -1;
    }
    Py_END_ALLOW_THREADS;
    PyObject *names = Py_NewRef(Py_None);
    if (status == 1 && cols.id_kind == 2) {
        Py_SETREF(names, string_list(cols.base, starts, cols.lens, count));
        if (!names) status = PyErr_Occurred() ? -2 : 0;
    }
    PyBuffer_Release(&buf);
    if (status == -1) PyErr_NoMemory();
    PyObject *out = NULL;
    if (status == 1) {
        out = Py_BuildValue("(y#y#y#y#O)", (const char *)cols.ids, cols.n * (Py_ssize_t)sizeof(int64_t),
                            (const char *)cols.cats, cols.n * (Py_ssize_t)sizeof(int64_t), (const char *)cols.boxes,
                            cols.n * 4 * (Py_ssize_t)sizeof(double), (const char *)cols.scores,
                            cols.n * (Py_ssize_t)sizeof(double), names);
    } else if (status == 0) {
        out = Py_NewRef(Py_None);
    }
    Py_XDECREF(names);
    free(starts);
    free(cols.ids);
    free(cols.cats);
    free(cols.boxes);
    free(cols.scores);
    free(cols.lens);
    return out;
}

/* --- COCO ground truth: the annotations array ------------------------------------------------------------------- */

/* The annotation keys the GT reader takes; any other key (segmentation, a typo) leaves the file to the JSON path. */
static const char *const GT_KEYS[6] = {"id", "image_id", "category_id", "bbox", "area", "iscrowd"};

typedef struct {
    int64_t *ids, *images, *cats;
    double *boxes, *areas;
    uint8_t *crowd;
    Py_ssize_t n, cap;
} GtColumns;

/* Room for cap annotations (at least the current); 0 when out of memory. */
static int gt_reserve(GtColumns *g, Py_ssize_t cap) {
    int64_t *ids = realloc(g->ids, (size_t)cap * sizeof(int64_t));
    if (ids) g->ids = ids;
    int64_t *images = realloc(g->images, (size_t)cap * sizeof(int64_t));
    if (images) g->images = images;
    int64_t *cats = realloc(g->cats, (size_t)cap * sizeof(int64_t));
    if (cats) g->cats = cats;
    double *boxes = realloc(g->boxes, (size_t)cap * 4 * sizeof(double));
    if (boxes) g->boxes = boxes;
    double *areas = realloc(g->areas, (size_t)cap * sizeof(double));
    if (areas) g->areas = areas;
    uint8_t *crowd = realloc(g->crowd, (size_t)cap);
    if (crowd) g->crowd = crowd;
    if (!ids || !images || !cats || !boxes || !areas || !crowd) return 0;
    g->cap = cap;
    return 1;
}

static int gt_grow(GtColumns *g) { return gt_reserve(g, g->cap ? g->cap * 2 : 4096); }

/* The annotations array at c->p ('[' next): 1 parsed, 0 not the plain form, -1 out of memory. An annotation is an
 * object with keys among GT_KEYS, none twice, image_id, category_id and bbox required: integer ids of at most 18
 * digits, a bbox of four numbers, a number area, an integer iscrowd. */
static int parse_annotations(Cursor *c, GtColumns *g) {
    if (!expect(c, '[')) return 0;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 1;
    }
    int more_items;
    do {
        if (g->n == g->cap && !gt_grow(g)) return -1;
        Py_ssize_t i = g->n;
        if (!expect(c, '{')) return 0;
        int seen = 0, more_members;
        g->areas[i] = NAN;
        g->crowd[i] = 0;
        g->ids[i] = (int64_t)i + 1;
        do {
            int key = key_index(c, GT_KEYS, 6);
            if (key < 0 || (seen & (1 << key)) || !expect(c, ':')) return 0;
            seen |= 1 << key;
            skip_ws(c);
            int ok;
            int64_t crowd;
            switch (key) {
                case 0: ok = read_int(c, &g->ids[i]); break;
                case 1: ok = read_int(c, &g->images[i]); break;
                case 2: ok = read_int(c, &g->cats[i]); break;
                case 4: ok = read_double(c, &g->areas[i]); break;
                case 5:
                    ok = read_int(c, &crowd);
                    g->crowd[i] = crowd != 0;
                    break;
                default:
                    ok = read_box(c, &g->boxes[4 * i]);
            }
            if (!ok || (more_members = next_item(c, '}')) < 0) return 0;
        } while (more_members);
        if ((seen & 14) != 14) return 0; /* image_id, category_id, bbox */
        g->n++;
        if ((more_items = next_item(c, ']')) < 0) return 0;
    } while (more_items);
    return 1;
}

/* Past one JSON value at c->p without checking it (the JSON parser reads everything outside the annotations):
 * strings skipped with their escapes, brackets counted. 0 when the bytes end first or nest beyond 10,000. */
static int skip_value(Cursor *c) {
    int depth = 0;
    skip_ws(c);
    do {
        if (c->p >= c->end) return 0;
        char ch = *c->p;
        if (ch == '"') {
            for (c->p++; c->p < c->end && *c->p != '"'; c->p++) {
                if (*c->p == '\\' && c->p + 1 < c->end) c->p++;
            }
            if (c->p >= c->end) return 0;
            c->p++;
        } else if (ch == '[' || ch == '{') {
            if (++depth > 10000) return 0;
            c->p++;
        } else if (ch == ']' || ch == '}') {
            if (--depth < 0) return 0;
            c->p++;
        } else if (depth == 0) { /* a scalar at the top: up to the next delimiter */
            while (c->p < c->end && !strchr(",]} \t\r\n", *c->p)) c->p++;
        } else {
            c->p++;
        }
    } while (depth > 0);
    return 1;
}

/* 1: the document is an object whose one top-level "annotations" value is a plain annotations array, parsed, its
 * byte range in *start, *stop; 0 otherwise; -1 out of memory. Touches no Python object. */
static int parse_gt(Cursor *c, GtColumns *g, Py_ssize_t *start, Py_ssize_t *stop) {
    const char *base = c->p;
    int found = 0;
    if (!expect(c, '{')) return 0;
    int more_members;
    do {
        const char *name;
        size_t len;
        if (!plain_string(c, &name, &len) || !expect(c, ':')) return 0;
        skip_ws(c);
        if (len == 11 && memcmp(name, "annotations", 11) == 0) {
            if (found) return 0; /* given twice: the JSON path keeps the last */
            found = 1;
            *start = c->p - base;
            /* an annotation takes at least 48 bytes: room for all at once (pages are touched only as filled) */
            if (!gt_reserve(g, (c->end - c->p) / 48 + 1)) return -1;
            int status = parse_annotations(c, g);
            if (status != 1) return status;
            *stop = c->p - base;
        } else if (!skip_value(c)) {
            return 0;
        }
        if ((more_members = next_item(c, '}')) < 0) return 0;
    } while (more_members);
    skip_ws(c);
    return found && c->p == c->end;
}

static PyObject *py_gt_annotations(PyObject *self, PyObject *args) {
    Py_buffer buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    GtColumns g = {NULL, NULL, NULL, NULL, NULL, NULL, 0, 0};
    Cursor c = {(const char *)buf.buf, (const char *)buf.buf + buf.len};
    Py_ssize_t start = 0, stop = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS;
    status = parse_gt(&c, &g, &start, &stop);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&buf);
    if (status == 1 && g.cap == 0 && !gt_grow(&g)) status = -1; /* an empty array: y# needs a buffer, not NULL */
    if (status < 0) PyErr_NoMemory();
    PyObject *out = NULL;
    if (status == 1) {
        Py_ssize_t n = g.n;
        out = Py_BuildValue("(nny#y#y#y#y#y#)", start, stop, (const char *)g.ids, n * 8, (const char *)g.images, n * 8,
                            (const char *)g.cats, n * 8, (const char *)g.boxes, n * 32, (const char *)g.areas, n * 8,
                            (const char *)g.crowd, n);
    } else if (status == 0) {
        out = Py_NewRef(Py_None);
    }
    free(g.ids);
    free(g.images);
    free(g.cats);
    free(g.boxes);
    free(g.areas);
    free(g.crowd);
    return out;
}

static PyMethodDef methods[] = {
    {"columns", py_columns, METH_VARARGS,
     "columns(data) -> (image_ids, category_ids, boxes, scores, names): int64/int64/float64/float64 bytes and None "
     "or the distinct string ids; or None"},
    {"gt_annotations", py_gt_annotations, METH_VARARGS,
     "gt_annotations(data) -> (start, stop, ids, image_ids, category_ids, boxes, areas, crowd) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cresults", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cresults(void) { return PyModule_Create(&module); }
