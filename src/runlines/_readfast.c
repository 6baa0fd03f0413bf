/* The optional C reader of load(): flat JSON objects, one per line, into Arrow column buffers.
 *
 * parse_lines(data, starts, ends) reads the lines data[starts[i]:ends[i]] of one bucket, each a
 * flat JSON object (string keys; numbers, strings, true, false, null as values), and returns
 * (names, columns, refused), or None when pyarrow must read the whole range instead:
 *   names    the keys, in order of first appearance;
 *   columns  per key, (kind, validity, values, data, nulls): kind is "int", "float", "bool",
 *            "str" or "null"; validity an Arrow bitmap (None when no row is null), values the
 *            int64 or double values, the bit-packed booleans or the int32 string offsets, data
 *            the UTF-8 string bytes (None for the other kinds), nulls the rows (int64) where
 *            the line holds the key as null;
 *   refused  the rows (int64) this parser did not take: nested values, duplicate keys, numbers
 *            beyond a double, lone surrogates, invalid UTF-8 or anything not plain JSON. Their
 *            cells are null; Python reads those lines.
 * None (pyarrow reads the range) when a key holds values of two kinds (a string and a number,
 * say) or an integer beyond 64 bits: pyarrow's rules for those are kept by letting it decide.
 *
 * A key's values mix ints and floats: float64, as pyarrow reads them. The parse runs without
 * the GIL and never reads outside [starts[i], ends[i]) of a line.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Single-phase init, no Py_mod_gil slot: this module needs the GIL, and setup.py does not build
 * it for free-threaded Python. */
#ifdef Py_GIL_DISABLED
#error "runlines._readfast relies on the GIL: pyarrow reads load()'s lines on free-threaded Python"
#endif

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__APPLE__)
#include <xlocale.h>
#elif defined(_WIN32)
typedef _locale_t locale_t;
#define newlocale(mask, name, base) _create_locale(LC_NUMERIC, (name))
#define strtod_l _strtod_l
#define LC_NUMERIC_MASK 0
#endif

enum { T_MISSING = 0, T_NULL, T_INT, T_FLOAT, T_TRUE, T_FALSE, T_STR };
enum { OK = 0, REFUSE = -1, NO_MEMORY = -2, FALLBACK = -3 };

#define MAX_COLUMNS 4096
#define PREDICT 64
#define NUMBER_CHARS 400

static locale_t c_locale;

typedef struct {
    char *bytes;
    size_t len, cap;
} Buf;

typedef struct {
    Buf name;
    uint8_t *tags;  /* one T_* per row */
    int64_t *vals;  /* int64, double bits, or the string's length */
    Buf data;       /* string values, in row order */
    Py_ssize_t last_row;
    int plain;      /* the name needs no escapes: a key matches it byte for byte */
} Column;

typedef struct {
    Py_ssize_t rows;
    Column *cols;
    Py_ssize_t ncols, cap;
    Py_ssize_t predicted[PREDICT];
    Py_ssize_t *touched;  /* the columns set in the current row */
    Py_ssize_t ntouched, touched_cap;
    int64_t *refused;
    Py_ssize_t nrefused;
    Buf key;
    int fallback;
} Parser;

static int buf_reserve(Buf *buf, size_t more) {
    if (buf->len + more <= buf->cap) return OK;
    size_t cap = buf->cap ? buf->cap : 64;
    while (cap < buf->len + more) {
        if (cap > SIZE_MAX / 2) return NO_MEMORY;
        cap *= 2;
    }
    char *grown = realloc(buf->bytes, cap);
    if (grown == NULL) return NO_MEMORY;
    buf->bytes = grown;
    buf->cap = cap;
    return OK;
}

static int buf_put(Buf *buf, const char *src, size_t len) {
    if (buf_reserve(buf, len) != OK) return NO_MEMORY;
    memcpy(buf->bytes + buf->len, src, len);
    buf->len += len;
    return OK;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static const char *skip_space(const char *p, const char *end) {
    while (p < end && is_space(*p)) p++;
    return p;
}

static int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return REFUSE;
    unsigned value = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        value <<= 4;
        if (c >= '0' && c <= '9') value |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') value |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') value |= (unsigned)(c - 'A' + 10);
        else return REFUSE;
    }
    *out = value;
    return OK;
}

static int put_code_point(Buf *out, unsigned cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buf_put(out, b, n);
}

/* Return the length of the valid UTF-8 sequence at p (2 to 4 bytes), or 0. */
static size_t utf8_length(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;  /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }  /* no UTF-8-encoded surrogates */
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    }
    return n;
}

/* Read the string whose opening quote is at *pp, unescaped into out; leave *pp after it. */
static int read_string(const char **pp, const char *end, Buf *out) {
    const unsigned char *p = (const unsigned char *)*pp + 1;
    const unsigned char *stop = (const unsigned char *)end;
    for (;;) {
        const unsigned char *run = p;
        while (p < stop && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p > run && buf_put(out, (const char *)run, (size_t)(p - run)) != OK) return NO_MEMORY;
        if (p >= stop) return REFUSE;
        unsigned char c = *p;
        if (c == '"') {
            *pp = (const char *)p + 1;
            return OK;
        }
        if (c < 0x20) return REFUSE;  /* a raw control character */
        if (c >= 0x80) {
            size_t n = utf8_length(p, stop);
            if (n == 0) return REFUSE;
            if (buf_put(out, (const char *)p, n) != OK) return NO_MEMORY;
            p += n;
            continue;
        }
        /* a backslash */
        if (p + 1 >= stop) return REFUSE;
        char e = (char)p[1];
        char plain;
        switch (e) {
            case '"': plain = '"'; break;
            case '\\': plain = '\\'; break;
            case '/': plain = '/'; break;
            case 'b': plain = '\b'; break;
            case 'f': plain = '\f'; break;
            case 'n': plain = '\n'; break;
            case 'r': plain = '\r'; break;
            case 't': plain = '\t'; break;
            case 'u': plain = 0; break;
            default: return REFUSE;
        }
        if (e != 'u') {
            if (buf_put(out, &plain, 1) != OK) return NO_MEMORY;
            p += 2;
            continue;
        }
        unsigned cp;
        if (hex4((const char *)p + 2, end, &cp) != OK) return REFUSE;
        p += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return REFUSE;  /* a lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low;
            if (stop - p < 6 || p[0] != '\\' || p[1] != 'u') return REFUSE;
            if (hex4((const char *)p + 2, end, &low) != OK) return REFUSE;
            if (low < 0xDC00 || low > 0xDFFF) return REFUSE;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            p += 6;
        }
        int status = put_code_point(out, cp);
        if (status != OK) return status;
    }
}

static const double POWERS[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Read the number at *pp: T_INT with an int64, or T_FLOAT with a double, correctly rounded. */
static int read_number(const char **pp, const char *end, int *tag, int64_t *out) {
    const char *s = *pp, *p = s;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end) return REFUSE;
    const char *digits = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return REFUSE;
    }
    const char *int_end = p;
    int is_int = 1;
    const char *frac = NULL, *frac_end = NULL;
    if (p < end && *p == '.') {
        p++;
        frac = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == frac) return REFUSE;
        frac_end = p;
        is_int = 0;
    }
    int exp_negative = 0;
    long exponent = 0;
    int exp_digits = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) exp_negative = *p++ == '-';
        const char *e0 = p;
        while (p < end && *p >= '0' && *p <= '9') {
            if (exp_digits < 6) exponent = exponent * 10 + (*p - '0');
            exp_digits++;
            p++;
        }
        if (p == e0) return REFUSE;
        is_int = 0;
    }
    if (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E'
                    || *p == '+' || *p == '-'))
        return REFUSE;
    *pp = p;
    if (is_int) {
        uint64_t value = 0;
        for (const char *d = digits; d < int_end; d++) {
            unsigned digit = (unsigned)(*d - '0');
            if (value > (UINT64_MAX - digit) / 10) return FALLBACK;
            value = value * 10 + digit;
        }
        if (negative) {
            if (value > (uint64_t)INT64_MAX + 1) return FALLBACK;
            *out = value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)value;
        } else {
            if (value > (uint64_t)INT64_MAX) return FALLBACK;
            *out = (int64_t)value;
        }
        *tag = T_INT;
        return OK;
    }
    double result;
    /* Clinger's fast path: an exact mantissa below 2^53 and an exact power of ten */
    uint64_t mantissa = 0;
    int significant = 0;
    for (const char *d = digits; d < int_end; d++) {
        if (significant || *d != '0') significant++;
        mantissa = mantissa * 10 + (uint64_t)(*d - '0');
        if (significant > 19) break;
    }
    long scale = 0;
    if (frac != NULL && significant <= 19) {
        for (const char *d = frac; d < frac_end; d++) {
            if (significant || *d != '0') significant++;
            if (significant > 19) break;
            mantissa = mantissa * 10 + (uint64_t)(*d - '0');
            scale--;
        }
    }
    long power = scale + (exp_negative ? -exponent : exponent);
    if (significant <= 19 && exp_digits <= 4 && mantissa <= (UINT64_C(1) << 53)
        && power >= -22 && power <= 22) {
        result = (double)mantissa;
        result = power < 0 ? result / POWERS[-power] : result * POWERS[power];
        if (negative) result = -result;
    } else {
        char text[NUMBER_CHARS + 1];
        size_t len = (size_t)(p - s);
        if (len > NUMBER_CHARS) return REFUSE;
        memcpy(text, s, len);
        text[len] = '\0';
        char *stopped = NULL;
        result = strtod_l(text, &stopped, c_locale);
        if (stopped != text + len) return REFUSE;
        if (isinf(result)) return REFUSE;  /* beyond a double: Python reads it as an infinity */
    }
    memcpy(out, &result, sizeof result);
    *tag = T_FLOAT;
    return OK;
}

static void column_free(Column *col) {
    free(col->name.bytes);
    free(col->tags);
    free(col->vals);
    free(col->data.bytes);
}

static void parser_free(Parser *ps) {
    for (Py_ssize_t i = 0; i < ps->ncols; i++) column_free(&ps->cols[i]);
    free(ps->cols);
    free(ps->touched);
    free(ps->refused);
    free(ps->key.bytes);
}

static int same_bytes(const char *a, const char *b, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* Return the column whose plain name the raw key at p (after its quote) spells, or -1. */
static Py_ssize_t match_raw_key(Parser *ps, Py_ssize_t position, const char *p, const char *end) {
    if (position >= PREDICT) return -1;
    Py_ssize_t guess = ps->predicted[position];
    if (guess < 0) return -1;
    Column *col = &ps->cols[guess];
    size_t len = col->name.len;
    if (!col->plain || (size_t)(end - p) <= len || p[len] != '"') return -1;
    return same_bytes(p, col->name.bytes, len) ? guess : -1;
}

static int is_plain(const char *name, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == '"' || c == '\\') return 0;
    }
    return 1;
}

/* Return the index of the column named by ps->key (made when new), or a negative status. */
static Py_ssize_t find_column(Parser *ps, Py_ssize_t position) {
    const char *name = ps->key.bytes;
    size_t len = ps->key.len;
    Py_ssize_t found = -1;
    for (Py_ssize_t i = 0; i < ps->ncols; i++) {
        if (ps->cols[i].name.len == len && (len == 0 || memcmp(ps->cols[i].name.bytes, name, len) == 0)) {
            found = i;
            break;
        }
    }
    if (found < 0) {
        if (ps->ncols >= MAX_COLUMNS) return FALLBACK;
        if (ps->ncols == ps->cap) {
            Py_ssize_t cap = ps->cap ? ps->cap * 2 : 16;
            Column *grown = realloc(ps->cols, (size_t)cap * sizeof(Column));
            if (grown == NULL) return NO_MEMORY;
            ps->cols = grown;
            ps->cap = cap;
        }
        Column *col = &ps->cols[ps->ncols];
        memset(col, 0, sizeof *col);
        col->last_row = -1;
        size_t rows = ps->rows > 0 ? (size_t)ps->rows : 1;
        col->tags = calloc(rows, 1);
        col->vals = calloc(rows, sizeof(int64_t));
        if (col->tags == NULL || col->vals == NULL || buf_put(&col->name, name, len) != OK) {
            column_free(col);
            return NO_MEMORY;
        }
        col->plain = is_plain(name, len);
        found = ps->ncols++;
    }
    if (position < PREDICT) ps->predicted[position] = found;
    return found;
}

static int touch(Parser *ps, Py_ssize_t index) {
    if (ps->ntouched == ps->touched_cap) {
        Py_ssize_t cap = ps->touched_cap ? ps->touched_cap * 2 : 64;
        Py_ssize_t *grown = realloc(ps->touched, (size_t)cap * sizeof(Py_ssize_t));
        if (grown == NULL) return NO_MEMORY;
        ps->touched = grown;
        ps->touched_cap = cap;
    }
    ps->touched[ps->ntouched++] = index;
    return OK;
}

/* Read one line into row *row*; REFUSE leaves the row empty. */
static int read_line(Parser *ps, Py_ssize_t row, const char *p, const char *end) {
    p = skip_space(p, end);
    if (p >= end || *p != '{') return REFUSE;
    p = skip_space(p + 1, end);
    if (p < end && *p == '}') return skip_space(p + 1, end) == end ? OK : REFUSE;
    for (Py_ssize_t position = 0;; position++) {
        if (p >= end || *p != '"') return REFUSE;
        int status;
        Py_ssize_t index = match_raw_key(ps, position, p + 1, end);
        if (index >= 0) {
            p += ps->cols[index].name.len + 2;
        } else {
            ps->key.len = 0;
            status = read_string(&p, end, &ps->key);
            if (status != OK) return status;
            index = find_column(ps, position);
            if (index < 0) return (int)index;
        }
        p = skip_space(p, end);
        if (p >= end || *p != ':') return REFUSE;
        p = skip_space(p + 1, end);
        if (p >= end) return REFUSE;
        Column *col = &ps->cols[index];
        if (col->last_row == row) return REFUSE;  /* a duplicate key */
        int tag;
        int64_t value = 0;
        char c = *p;
        if (c == '"') {
            size_t before = col->data.len;
            status = read_string(&p, end, &col->data);
            if (status != OK) {
                col->data.len = before;
                return status;
            }
            tag = T_STR;
            value = (int64_t)(col->data.len - before);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            status = read_number(&p, end, &tag, &value);
            if (status != OK) return status;
        } else if (c == 't' && end - p >= 4 && memcmp(p, "true", 4) == 0) {
            tag = T_TRUE;
            p += 4;
        } else if (c == 'f' && end - p >= 5 && memcmp(p, "false", 5) == 0) {
            tag = T_FALSE;
            p += 5;
        } else if (c == 'n' && end - p >= 4 && memcmp(p, "null", 4) == 0) {
            tag = T_NULL;
            p += 4;
        } else {
            return REFUSE;  /* nested, or not JSON */
        }
        if (touch(ps, index) != OK) {
            if (tag == T_STR) col->data.len -= (size_t)value;
            return NO_MEMORY;
        }
        col->tags[row] = (uint8_t)tag;
        col->vals[row] = value;
        col->last_row = row;
        p = skip_space(p, end);
        if (p >= end) return REFUSE;
        if (*p == '}') return skip_space(p + 1, end) == end ? OK : REFUSE;
        if (*p != ',') return REFUSE;
        p = skip_space(p + 1, end);
    }
}

static void undo_row(Parser *ps, Py_ssize_t row) {
    for (Py_ssize_t i = 0; i < ps->ntouched; i++) {
        Column *col = &ps->cols[ps->touched[i]];
        if (col->tags[row] == T_STR) col->data.len -= (size_t)col->vals[row];
        col->tags[row] = T_MISSING;
        col->vals[row] = 0;
        col->last_row = -1;
    }
}

/* Parse every line; return OK, NO_MEMORY or FALLBACK. */
static int parse_all(Parser *ps, const char *data, const int64_t *starts, const int64_t *ends) {
    for (Py_ssize_t i = 0; i < PREDICT; i++) ps->predicted[i] = -1;
    for (Py_ssize_t row = 0; row < ps->rows; row++) {
        ps->ntouched = 0;
        int status = read_line(ps, row, data + starts[row], data + ends[row]);
        if (status == OK) continue;
        if (status == NO_MEMORY || status == FALLBACK) return status;
        undo_row(ps, row);
        ps->refused[ps->nrefused++] = row;
    }
    return OK;
}

static PyObject *bytes_of(const void *src, size_t len) {
    return PyBytes_FromStringAndSize((const char *)src, (Py_ssize_t)len);
}

/* Return (kind, validity, values, data, nulls) for one column, Py_None when pyarrow must decide,
   or NULL with an exception set. */
static PyObject *finish_column(Column *col, Py_ssize_t rows) {
    int seen[T_STR + 1] = {0};
    Py_ssize_t valid = 0;
    for (Py_ssize_t r = 0; r < rows; r++) seen[col->tags[r]] = 1;
    for (Py_ssize_t r = 0; r < rows; r++) valid += col->tags[r] > T_NULL;
    const char *kind;
    if (seen[T_STR]) {
        if (seen[T_INT] || seen[T_FLOAT] || seen[T_TRUE] || seen[T_FALSE]) Py_RETURN_NONE;
        if (col->data.len > INT32_MAX) Py_RETURN_NONE;
        kind = "str";
    } else if (seen[T_TRUE] || seen[T_FALSE]) {
        if (seen[T_INT] || seen[T_FLOAT]) Py_RETURN_NONE;
        kind = "bool";
    } else if (seen[T_FLOAT]) {
        kind = "float";
    } else if (seen[T_INT]) {
        kind = "int";
    } else {
        kind = "null";
    }
    size_t bitmap_len = ((size_t)rows + 7) / 8;
    PyObject *validity = NULL, *values = NULL, *data = NULL;
    if (valid < rows && kind[0] != 'n') {
        validity = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bitmap_len);
        if (validity == NULL) return NULL;
        uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(validity);
        memset(bits, 0, bitmap_len);
        for (Py_ssize_t r = 0; r < rows; r++)
            if (col->tags[r] > T_NULL) bits[r >> 3] |= (uint8_t)(1u << (r & 7));
    } else {
        validity = Py_NewRef(Py_None);
    }
    if (kind[0] == 'i' || kind[0] == 'f') {
        values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((size_t)rows * 8));
        if (values == NULL) goto error;
        char *out = PyBytes_AS_STRING(values);
        for (Py_ssize_t r = 0; r < rows; r++) {
            int tag = col->tags[r];
            if (kind[0] == 'i') {
                int64_t v = tag == T_INT ? col->vals[r] : 0;
                memcpy(out + 8 * r, &v, 8);
            } else {
                double v = 0.0;
                if (tag == T_INT) v = (double)col->vals[r];
                else if (tag == T_FLOAT) memcpy(&v, &col->vals[r], 8);
                memcpy(out + 8 * r, &v, 8);
            }
        }
    } else if (kind[0] == 'b') {
        values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bitmap_len);
        if (values == NULL) goto error;
        uint8_t *bits = (uint8_t *)PyBytes_AS_STRING(values);
        memset(bits, 0, bitmap_len);
        for (Py_ssize_t r = 0; r < rows; r++)
            if (col->tags[r] == T_TRUE) bits[r >> 3] |= (uint8_t)(1u << (r & 7));
    } else if (kind[0] == 's') {
        values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((size_t)(rows + 1) * 4));
        if (values == NULL) goto error;
        char *out = PyBytes_AS_STRING(values);
        int32_t offset = 0;
        memcpy(out, &offset, 4);
        for (Py_ssize_t r = 0; r < rows; r++) {
            if (col->tags[r] == T_STR) offset += (int32_t)col->vals[r];
            memcpy(out + 4 * (r + 1), &offset, 4);
        }
        data = bytes_of(col->data.bytes ? col->data.bytes : "", col->data.len);
        if (data == NULL) goto error;
    }
    if (values == NULL) values = Py_NewRef(Py_None);
    if (data == NULL) data = Py_NewRef(Py_None);
    Py_ssize_t nulls = 0;
    for (Py_ssize_t r = 0; r < rows; r++) nulls += col->tags[r] == T_NULL;
    PyObject *null_rows = PyBytes_FromStringAndSize(NULL, nulls * 8);
    if (null_rows == NULL) goto error;
    char *at = PyBytes_AS_STRING(null_rows);
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (col->tags[r] != T_NULL) continue;
        int64_t row = r;
        memcpy(at, &row, 8);
        at += 8;
    }
    return Py_BuildValue("(sNNNN)", kind, validity, values, data, null_rows);
error:
    Py_XDECREF(validity);
    Py_XDECREF(values);
    Py_XDECREF(data);
    return NULL;
}

static int get_int64s(PyObject *obj, Py_buffer *view, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@') format++;
    if (view->itemsize != 8 || (strcmp(format, "q") != 0 && strcmp(format, "l") != 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int64 array", what);
        return -1;
    }
    return 0;
}

static PyObject *parse_lines(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data_obj, *starts_obj, *ends_obj;
    if (!PyArg_ParseTuple(args, "OOO:parse_lines", &data_obj, &starts_obj, &ends_obj)) return NULL;
    Py_buffer data, starts, ends;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (get_int64s(starts_obj, &starts, "starts") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (get_int64s(ends_obj, &ends, "ends") < 0) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL;
    Parser ps;
    memset(&ps, 0, sizeof ps);
    ps.rows = starts.len / 8;
    const int64_t *s = starts.buf, *e = ends.buf;
    if (ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and ends must have the same length");
        goto done;
    }
    for (Py_ssize_t r = 0; r < ps.rows; r++) {
        if (s[r] < 0 || s[r] > e[r] || e[r] > (int64_t)data.len) {
            PyErr_Format(PyExc_ValueError, "line %zd spans [%lld, %lld), outside the data",
                         r, (long long)s[r], (long long)e[r]);
            goto done;
        }
    }
    ps.refused = malloc((size_t)(ps.rows > 0 ? ps.rows : 1) * sizeof(int64_t));
    if (ps.refused == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = parse_all(&ps, (const char *)data.buf, s, e);
    Py_END_ALLOW_THREADS
    if (status == NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == FALLBACK) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *names = PyList_New(0), *columns = PyList_New(0);
    if (names == NULL || columns == NULL) goto fail;
    for (Py_ssize_t i = 0; i < ps.ncols; i++) {
        Column *col = &ps.cols[i];
        int present = 0;
        for (Py_ssize_t r = 0; r < ps.rows && !present; r++) present = col->tags[r] != T_MISSING;
        if (!present) continue;  /* only in refused lines */
        PyObject *column = finish_column(col, ps.rows);
        if (column == NULL) goto fail;
        if (column == Py_None) {  /* values of two kinds: pyarrow decides */
            Py_DECREF(column);
            Py_DECREF(names);
            Py_DECREF(columns);
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *name = PyUnicode_DecodeUTF8(col->name.bytes ? col->name.bytes : "",
                                              (Py_ssize_t)col->name.len, "strict");
        if (name == NULL || PyList_Append(names, name) < 0 || PyList_Append(columns, column) < 0) {
            Py_XDECREF(name);
            Py_DECREF(column);
            goto fail;
        }
        Py_DECREF(name);
        Py_DECREF(column);
    }
    PyObject *refused = bytes_of(ps.refused, (size_t)ps.nrefused * sizeof(int64_t));
    if (refused == NULL) goto fail;
    result = Py_BuildValue("(NNN)", names, columns, refused);
    goto done;
fail:
    Py_XDECREF(names);
    Py_XDECREF(columns);
done:
    parser_free(&ps);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"parse_lines", parse_lines, METH_VARARGS,
     "parse_lines(data, starts, ends) -> (names, columns, refused) or None\n\n"
     "Read flat JSON objects, one per line, into Arrow column buffers (see _readfast.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_readfast", "The C reader of load()'s common lines.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__readfast(void) {
    if (c_locale == (locale_t)0) {
        c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (c_locale == (locale_t)0) {
            PyErr_SetString(PyExc_ImportError, "cannot make the C locale for strtod_l");
            return NULL;
        }
    }
    return PyModule_Create(&module_def);
}
