/* The fast path of Run.log, for records of plain numbers, short strings and 0-d tensors.
 *
 * A Writer is the C twin of _writer.py's Writer.log, and stands in front of it as a run's
 * log(). A call whose event and key set the run has already planned, whose plan is not careful
 * (no key name to redact), is stamped, encoded with the same orjson call and options as
 * _writer.py, and written with one write(2) per descriptor, as _writer.py would write it,
 * byte for byte. An "as is" plan (mode 0) takes values that are exactly int, finite float or
 * bool. A "light" plan (mode 1) also takes None, a str whose redacted form the run already
 * remembers (its `texts` dict: Python redacts each distinct text once), and a value of the
 * exact numpy or torch type the plan saw, written as its item() when it is 0-d and a finite
 * number. Every other call (a first record, a new
 * string, NaN, a sampled event, a closed run, a failed sink, a due check of the log file) goes
 * to the Python log(), which decides everything. SpanBase is the same for spans. This file
 * adds no behaviour of its own: it only skips interpreter work on the common calls.
 *
 * Every object it uses is handed in as an argument (the clock, the run's dicts, the tracer's
 * core list); it looks up no Python module global or attribute by name.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Single-phase init, no Py_mod_gil slot: this module needs the GIL. setup.py does not build it
 * for free-threaded Python, nor on Windows (it writes with POSIX write(2)). */
#ifdef Py_GIL_DISABLED
#error "runlines._speedups relies on the GIL: the pure-Python path runs on free-threaded Python"
#endif
#ifdef _WIN32
#error "runlines._speedups writes with POSIX write(2): the pure-Python path runs on Windows"
#endif

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define CACHE_SIZE 64 /* a power of two: slots for (event, call site) pairs */

typedef struct {
    PyObject *event;   /* the event str of the call */
    PyObject *kwnames; /* the call site's tuple of field names */
    PyObject *types;   /* a light plan's value types (_writer.py's plan[1]), else NULL */
    int fast;          /* the plan lets plain values through; else always hand to Python */
} Entry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow;      /* the Python Writer.log: everything the fast path declines */
    PyObject *failed;    /* Writer._write_failed(fd, line, written, err) */
    PyObject *span_slow; /* Writer.log_span: every span record the fast path declines */
    PyObject *span_names; /* the run's dict: span name -> its redacted form */
    PyObject *plans;     /* the run's dict: (event, *names) -> (mode, types) */
    PyObject *texts;     /* the run's dict: short str value -> its redacted form */
    PyObject *samplers;  /* the run's dict: event -> sampler (replaced whole by the run) */
    PyObject *clock;     /* the clock of `ts`, called per record (_writer.py's _wall_clock) */
    PyObject *dumps;     /* orjson.dumps */
    PyObject *dumps_args_tail; /* (default, option) */
    PyObject *dumps_kwnames;   /* ("default", "option") */
    PyObject *name;      /* the run's name */
    PyObject *rank;      /* the rank, or None */
    PyObject *fds;       /* tuple of descriptors, or None: the fast path is off */
    PyObject *flush;     /* sys.stdout.flush to call first, or None */
    PyTypeObject *span_type;   /* spans.Span, a subclass of SpanBase; NULL until set_spans() */
    PyObject *span_factory_slow; /* Run.span: every span() call the fast path declines */
    PyObject *core;      /* the tracer's core list: [threads, new_thread, clock, emit] */
    double next_check;   /* log() checks the log file at this time: leave that to Python */
    int enabled;
    /* Calls between the last check that the run is open and the end of their writes. No Python
     * code runs in a thread while it is counted here, so a run that closes waits for the count
     * to reach 0 (other threads' writes) before it closes the descriptors. */
    Py_ssize_t writing;
    unsigned long long hits; /* records the fast path wrote (tests and benchmarks read it) */
    Entry cache[CACHE_SIZE];
} Writer;

static PyObject *str_ts;
static PyObject *str_event;
static PyObject *str_run;
static PyObject *str_rank;
static PyObject *str_span;
static PyObject *str_name;
static PyObject *str_duration_s;
static PyObject *str_parent;
static PyObject *str_status;
static PyObject *str_exc_type;
static PyObject *str_ndim;
static PyObject *str_item;

#define MODE_AS_IS 0 /* _writer.py's _AS_IS, _LIGHT: the plans the fast path takes */
#define MODE_LIGHT 1

static void
entry_clear(Entry *entry)
{
    Py_CLEAR(entry->event);
    Py_CLEAR(entry->kwnames);
    Py_CLEAR(entry->types);
    entry->fast = 0;
}

static void
writer_forget_all(Writer *self)
{
    for (int i = 0; i < CACHE_SIZE; i++) {
        entry_clear(&self->cache[i]);
    }
}

static inline size_t
slot_of(PyObject *event, PyObject *kwnames)
{
    size_t h = ((size_t)event >> 4) * 31u + ((size_t)kwnames >> 4);
    return (h ^ (h >> 7)) & (CACHE_SIZE - 1);
}

/* Types the fast path writes without a look: they hold no string, no secret, no null. */
static inline int
is_plain_type(PyObject *type)
{
    return type == (PyObject *)&PyLong_Type || type == (PyObject *)&PyFloat_Type ||
           type == (PyObject *)&PyBool_Type;
}

static inline int
is_plain_or_none(PyObject *type)
{
    return is_plain_type(type) || type == (PyObject *)Py_TYPE(Py_None);
}

#define DECLINE ((PyObject *)-1) /* not an error: hand the call to Python */

/* What a light plan writes for a str (its remembered redacted form) or a 0-d numpy or torch
 * value (its item(), a finite number), as _writer.py's Writer._prepare() does; a new reference, or
 * DECLINE (no error set) for Python to decide. */
static PyObject *
light_value(Writer *self, PyObject *value)
{
    if (PyUnicode_CheckExact(value)) {
        PyObject *text = PyDict_GetItemWithError(self->texts, value); /* borrowed */
        if (text == NULL) {
            PyErr_Clear();
            return DECLINE;
        }
        return Py_NewRef(text);
    }
    PyObject *ndim = PyObject_GetAttr(value, str_ndim);
    if (ndim == NULL) {
        PyErr_Clear();
        return DECLINE;
    }
    int scalar = PyLong_CheckExact(ndim) && PyLong_AsLong(ndim) == 0;
    Py_DECREF(ndim);
    if (!scalar) {
        PyErr_Clear();
        return DECLINE; /* an array: Python writes it as a list, or refuses it */
    }
    PyObject *number = PyObject_CallMethodNoArgs(value, str_item);
    if (number == NULL) {
        PyErr_Clear(); /* a meta tensor, say: Python writes its repr */
        return DECLINE;
    }
    PyObject *type = (PyObject *)Py_TYPE(number);
    if ((type == (PyObject *)&PyFloat_Type && isfinite(PyFloat_AS_DOUBLE(number))) ||
        type == (PyObject *)&PyLong_Type || type == (PyObject *)&PyBool_Type) {
        return number;
    }
    Py_DECREF(number);
    return DECLINE;
}

/* Learn the plan of (event, kwnames) from the run's plans, once Python has made one. Returns
 * the cached entry (not fast when the plan is careful: key names to redact, or values that
 * need the careful path), or NULL (no error set) when there is no plan yet. A plan that is not
 * careful writes plain values without a look in Python too: no drift check, no redaction. */
static Entry *
learn(Writer *self, PyObject *event, PyObject *kwnames, Entry *slot)
{
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    PyObject *key = PyTuple_New(n + 1);
    if (key == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(event);
    PyTuple_SET_ITEM(key, 0, event);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        Py_INCREF(name);
        PyTuple_SET_ITEM(key, i + 1, name);
    }
    PyObject *plan = PyDict_GetItemWithError(self->plans, key); /* borrowed */
    Py_DECREF(key);
    if (plan == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 3) { /* (mode, types, nulls) */
        return NULL;
    }
    PyObject *mode_obj = PyTuple_GET_ITEM(plan, 0);
    PyObject *types = PyTuple_GET_ITEM(plan, 1);
    long mode = PyLong_CheckExact(mode_obj) ? PyLong_AsLong(mode_obj) : -1;
    if (mode == MODE_LIGHT && (!PyTuple_CheckExact(types) || PyTuple_GET_SIZE(types) != n)) {
        mode = -1;
    }
    entry_clear(slot);
    Py_INCREF(event);
    Py_INCREF(kwnames);
    slot->event = event;
    slot->kwnames = kwnames;
    /* a careful plan stays careful until the run forgets its plans (and this cache with them) */
    slot->fast = mode == MODE_AS_IS || mode == MODE_LIGHT;
    slot->types = mode == MODE_LIGHT ? Py_NewRef(types) : NULL;
    return slot;
}

/* Write line to fd as os.write would: retry on EINTR after running signal handlers.
 * Returns bytes written, or -1 with errno set (no Python error), -2 with a Python error
 * raised by a signal handler, or -3 when a signal handler closed the run (fds changed). */
static Py_ssize_t
write_fd(Writer *self, PyObject *fds, int fd, const char *data, Py_ssize_t size)
{
    Py_ssize_t n;
    int err;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        n = write(fd, data, (size_t)size);
        err = errno;
        Py_END_ALLOW_THREADS
        if (n >= 0) {
            return n;
        }
        if (err != EINTR) {
            errno = err;
            return -1;
        }
        self->writing--; /* a handler may close the run: it must not wait for this thread */
        int failed = PyErr_CheckSignals() < 0;
        self->writing++;
        if (failed) {
            return -2;
        }
        if (!self->enabled) {
            return -3; /* the run began to close meanwhile: fd may be closed and reused */
        }
    }
}

static PyObject *emit(Writer *self, PyObject *line);

/* A record {"ts": _now(), "event": event, "run": name[, "rank": rank]}, with room for `more`
 * fields. Returns DECLINE when Python must write it (the clock is not the float clock, or the
 * once-a-second check of the log file is due and check_file is set), NULL on an error. */
static PyObject *
record_head(Writer *self, PyObject *event, Py_ssize_t more, int check_file)
{
    PyObject *ts = PyObject_CallNoArgs(self->clock);
    if (ts == NULL) {
        return NULL; /* the clock failed: Python's log() would raise the same */
    }
    if (!PyFloat_CheckExact(ts) || (check_file && PyFloat_AS_DOUBLE(ts) >= self->next_check)) {
        Py_DECREF(ts);
        return DECLINE;
    }
#if PY_VERSION_HEX < 0x030F0000
    /* Private, but declared in cpython/dictobject.h of 3.11 to 3.14 (CI builds each); a later
     * Python gets the public PyDict_New, which gives the same dict after a resize or two. */
    PyObject *record = _PyDict_NewPresized(more + 4); /* no resize while filling */
#else
    PyObject *record = PyDict_New();
#endif
    if (record == NULL) {
        Py_DECREF(ts);
        return NULL;
    }
    int bad = PyDict_SetItem(record, str_ts, ts);
    Py_DECREF(ts);
    bad = bad || PyDict_SetItem(record, str_event, event);
    bad = bad || PyDict_SetItem(record, str_run, self->name);
    if (self->rank != Py_None) {
        bad = bad || PyDict_SetItem(record, str_rank, self->rank);
    }
    if (bad) {
        Py_DECREF(record);
        return NULL;
    }
    return record;
}

/* orjson.dumps(record, default=encode_default, option=...): the call _writer.py makes. */
static PyObject *
encode(Writer *self, PyObject *record)
{
    PyObject *dump_args[3] = {
        record,
        PyTuple_GET_ITEM(self->dumps_args_tail, 0),
        PyTuple_GET_ITEM(self->dumps_args_tail, 1),
    };
    return PyObject_Vectorcall(self->dumps, dump_args, 1, self->dumps_kwnames);
}

static PyObject *
call_slow(Writer *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (self->slow == NULL) { /* cleared by the garbage collector with its run */
        PyErr_SetString(PyExc_RuntimeError, "runlines: this run's writer was collected");
        return NULL;
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *
writer_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Writer *self = (Writer *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (!self->enabled || nargs != 1 || kwnames == NULL || self->fds == Py_None) {
        return call_slow(self, args, nargsf, kwnames);
    }
    PyObject *event = args[0];
    if (!PyUnicode_CheckExact(event)) {
        return call_slow(self, args, nargsf, kwnames);
    }
    if (PyDict_GET_SIZE(self->samplers) != 0) {
        int sampled = PyDict_Contains(self->samplers, event);
        if (sampled != 0) {
            if (sampled < 0) {
                PyErr_Clear();
            }
            return call_slow(self, args, nargsf, kwnames);
        }
    }
    Entry *entry = &self->cache[slot_of(event, kwnames)];
    if (entry->event != event || entry->kwnames != kwnames) {
        entry = learn(self, event, kwnames, entry);
        if (entry == NULL) {
            return call_slow(self, args, nargsf, kwnames);
        }
    }
    if (!entry->fast) {
        return call_slow(self, args, nargsf, kwnames);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames);
    PyObject *const *values = args + 1;
    PyObject *types = entry->types;
    int converts = 0; /* a str or a 0-d tensor to replace while filling the record */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = values[i];
        PyObject *type = (PyObject *)Py_TYPE(value);
        if (type == (PyObject *)&PyFloat_Type && !isfinite(PyFloat_AS_DOUBLE(value))) {
            return call_slow(self, args, nargsf, kwnames); /* null + _nonfinite */
        }
        if (is_plain_type(type)) {
            if (types != NULL && !is_plain_or_none(PyTuple_GET_ITEM(types, i))) {
                return call_slow(self, args, nargsf, kwnames); /* a change of kind */
            }
        }
        else if (types == NULL) { /* a str, None, an array...: Python looks at it */
            return call_slow(self, args, nargsf, kwnames);
        }
        else if (value == Py_None) {
            if (!is_plain_or_none(PyTuple_GET_ITEM(types, i))) {
                return call_slow(self, args, nargsf, kwnames); /* a change of kind */
            }
        }
        else if (type != PyTuple_GET_ITEM(types, i)) {
            return call_slow(self, args, nargsf, kwnames); /* a type the plan has not seen */
        }
        else if (type == (PyObject *)&PyUnicode_Type) {
            if (PyDict_GetItemWithError(self->texts, value) == NULL) {
                PyErr_Clear();
                return call_slow(self, args, nargsf, kwnames); /* Python redacts it first */
            }
            converts = 1;
        }
        else {
            converts = 1; /* the plan's numpy or torch type: its item(), while filling */
        }
    }

    PyObject *record = record_head(self, event, n, 1);
    if (record == DECLINE) {
        return call_slow(self, args, nargsf, kwnames);
    }
    if (record == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = values[i];
        int bad;
        if (converts && !is_plain_type((PyObject *)Py_TYPE(value)) && value != Py_None) {
            PyObject *written = light_value(self, value);
            if (written == DECLINE) {
                Py_DECREF(record);
                return call_slow(self, args, nargsf, kwnames);
            }
            bad = PyDict_SetItem(record, PyTuple_GET_ITEM(kwnames, i), written) < 0;
            Py_DECREF(written);
        }
        else {
            bad = PyDict_SetItem(record, PyTuple_GET_ITEM(kwnames, i), value) < 0;
        }
        if (bad) {
            Py_DECREF(record);
            return NULL;
        }
    }
    PyObject *line = encode(self, record);
    Py_DECREF(record);
    if (line == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return NULL;
        }
        PyErr_Clear(); /* an int beyond 64 bits, say: Python's careful path encodes it */
        return call_slow(self, args, nargsf, kwnames);
    }
    PyObject *result = emit(self, line);
    if (result == DECLINE) {
        return call_slow(self, args, nargsf, kwnames);
    }
    if (result != NULL) {
        self->hits++;
    }
    return result;
}

/* As _writer.py's Writer.log() after encoding: the program's own prints first, then one write per
 * descriptor; a failed or short write goes to the sink's own handling. Steals line. Returns
 * DECLINE, writing nothing, when the run closed or left the fast path since the call began:
 * the caller hands the call to Python, which raises RunStateError or writes through the sinks.
 */
static PyObject *
emit(Writer *self, PyObject *line)
{
    if (!PyBytes_CheckExact(line)) {
        Py_DECREF(line);
        PyErr_SetString(PyExc_TypeError, "runlines: the encoder did not return bytes");
        return NULL;
    }
    PyObject *flush = self->flush;
    if (flush != Py_None) {
        Py_INCREF(flush);
        PyObject *done = PyObject_CallNoArgs(flush);
        Py_DECREF(flush);
        if (done == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_OSError) &&
                !PyErr_ExceptionMatches(PyExc_ValueError)) {
                Py_DECREF(line);
                return NULL;
            }
            PyErr_Clear(); /* a closed or broken stdout: the write below counts the drop */
        }
        else {
            Py_DECREF(done);
        }
    }
    /* Checked after the flush (Python code, other threads may close the run meanwhile) and
     * with no Python code until the count drops: a closed descriptor is never written. */
    PyObject *fds = self->fds;
    if (!self->enabled || fds == NULL || fds == Py_None) {
        Py_DECREF(line);
        return DECLINE;
    }
    Py_INCREF(fds);
    self->writing++;
    const char *data = PyBytes_AS_STRING(line);
    Py_ssize_t size = PyBytes_GET_SIZE(line);
    Py_ssize_t nfds = PyTuple_GET_SIZE(fds);
    PyObject *result = Py_None;
    for (Py_ssize_t i = 0; i < nfds; i++) {
        PyObject *fd_obj = PyTuple_GET_ITEM(fds, i);
        int fd = (int)PyLong_AsLong(fd_obj);
        if (fd == -1 && PyErr_Occurred()) {
            result = NULL;
            break;
        }
        Py_ssize_t written = write_fd(self, fds, fd, data, size);
        if (written == -2) {
            result = NULL;
            break;
        }
        if (written == -3) {
            result = i == 0 ? DECLINE : Py_None; /* the log has it, or Python decides */
            break;
        }
        if (written == size) {
            continue;
        }
        int err = errno;
        self->writing--; /* _write_failed is Python code */
        PyObject *done;
        if (written == -1) {
            /* OSError(errno, strerror) picks the subclass, as os.write's error would be */
            PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", err, strerror(err));
            done = exc == NULL ? NULL
                               : PyObject_CallFunction(self->failed, "OOiO", fd_obj, line, 0, exc);
            Py_XDECREF(exc);
        }
        else {
            done = PyObject_CallFunction(self->failed, "OOnO", fd_obj, line, written, Py_None);
        }
        self->writing++;
        if (done == NULL) {
            result = NULL;
            break;
        }
        Py_DECREF(done);
        if (!self->enabled) {
            break; /* the run began to close while Python ran: fds may be closed by now */
        }
    }
    self->writing--;
    Py_DECREF(fds);
    Py_DECREF(line);
    if (result == Py_None) {
        Py_RETURN_NONE;
    }
    return result;
}

static PyObject *
writer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"slow", "failed", "span_slow", "span_names", "plans", "texts",
                             "clock", "dumps", "default", "option", "name", "rank", NULL};
    PyObject *slow, *failed, *span_slow, *span_names, *plans, *texts, *clock, *dumps, *dflt,
        *option, *name, *rank;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!O!O!OOOOUO:Writer", kwlist, &slow,
                                     &failed, &span_slow, &PyDict_Type, &span_names, &PyDict_Type,
                                     &plans, &PyDict_Type, &texts, &clock, &dumps, &dflt, &option,
                                     &name, &rank)) {
        return NULL;
    }
    Writer *self = (Writer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = writer_vectorcall;
    self->dumps_args_tail = PyTuple_Pack(2, dflt, option);
    /* interned, as the keyword names of a Python call site are: orjson compares pointers */
    PyObject *kw_default = PyUnicode_InternFromString("default");
    PyObject *kw_option = PyUnicode_InternFromString("option");
    if (kw_default != NULL && kw_option != NULL) {
        self->dumps_kwnames = PyTuple_Pack(2, kw_default, kw_option);
    }
    Py_XDECREF(kw_default);
    Py_XDECREF(kw_option);
    if (self->dumps_args_tail == NULL || self->dumps_kwnames == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->slow = Py_NewRef(slow);
    self->failed = Py_NewRef(failed);
    self->span_slow = Py_NewRef(span_slow);
    self->span_names = Py_NewRef(span_names);
    self->plans = Py_NewRef(plans);
    self->texts = Py_NewRef(texts);
    self->samplers = PyDict_New();
    if (self->samplers == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->clock = Py_NewRef(clock);
    self->dumps = Py_NewRef(dumps);
    self->name = Py_NewRef(name);
    self->rank = Py_NewRef(rank);
    self->fds = Py_NewRef(Py_None);
    self->flush = Py_NewRef(Py_None);
    self->next_check = 0.0;
    self->enabled = 0;
    self->writing = 0;
    return (PyObject *)self;
}

static int
writer_traverse(Writer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->slow);
    Py_VISIT(self->failed);
    Py_VISIT(self->span_slow);
    Py_VISIT(self->span_names);
    Py_VISIT(self->span_type);
    Py_VISIT(self->span_factory_slow);
    Py_VISIT(self->core);
    Py_VISIT(self->plans);
    Py_VISIT(self->texts);
    Py_VISIT(self->samplers);
    Py_VISIT(self->clock);
    Py_VISIT(self->dumps);
    Py_VISIT(self->dumps_args_tail);
    Py_VISIT(self->dumps_kwnames);
    Py_VISIT(self->name);
    Py_VISIT(self->rank);
    Py_VISIT(self->fds);
    Py_VISIT(self->flush);
    for (int i = 0; i < CACHE_SIZE; i++) {
        Py_VISIT(self->cache[i].event);
        Py_VISIT(self->cache[i].kwnames);
        Py_VISIT(self->cache[i].types);
    }
    return 0;
}

static int
writer_clear(Writer *self)
{
    Py_CLEAR(self->slow);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->span_slow);
    Py_CLEAR(self->span_names);
    Py_CLEAR(self->span_type);
    Py_CLEAR(self->span_factory_slow);
    Py_CLEAR(self->core);
    Py_CLEAR(self->plans);
    Py_CLEAR(self->texts);
    Py_CLEAR(self->samplers);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->dumps);
    Py_CLEAR(self->dumps_args_tail);
    Py_CLEAR(self->dumps_kwnames);
    Py_CLEAR(self->name);
    Py_CLEAR(self->rank);
    Py_CLEAR(self->fds);
    Py_CLEAR(self->flush);
    writer_forget_all(self);
    self->enabled = 0;
    return 0;
}

static void
writer_dealloc(Writer *self)
{
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
writer_configure(Writer *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"enabled", "fds", "flush", "next_check", "samplers", NULL};
    int enabled;
    PyObject *fds, *flush, *samplers;
    double next_check;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "pOOdO!:configure", kwlist, &enabled, &fds,
                                     &flush, &next_check, &PyDict_Type, &samplers)) {
        return NULL;
    }
    if (fds != Py_None) {
        if (!PyTuple_CheckExact(fds)) {
            PyErr_SetString(PyExc_TypeError, "fds must be a tuple of ints or None");
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fds); i++) {
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(fds, i))) {
                PyErr_SetString(PyExc_TypeError, "fds must be a tuple of ints or None");
                return NULL;
            }
        }
    }
    Py_XSETREF(self->fds, Py_NewRef(fds));
    Py_XSETREF(self->flush, Py_NewRef(flush));
    Py_XSETREF(self->samplers, Py_NewRef(samplers));
    self->next_check = next_check;
    self->enabled = enabled;
    Py_RETURN_NONE;
}

/* Encode and write a record runlines built itself (a span's), already redacted. */
static PyObject *
writer_write_record(Writer *self, PyObject *record)
{
    if (!self->enabled || self->fds == NULL || self->fds == Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "runlines: write_record() while the fast path is off");
        return NULL;
    }
    PyObject *line = encode(self, record);
    if (line == NULL) {
        return NULL;
    }
    PyObject *result = emit(self, line);
    if (result == DECLINE) {
        Py_RETURN_FALSE; /* the run closed meanwhile: Python decides */
    }
    if (result == NULL) {
        return NULL;
    }
    Py_DECREF(result);
    Py_RETURN_TRUE;
}

/* The tracer's emit: write a finished span's record as Writer.log_span would, when the span
 * has no fields of its own, its names were redacted before and the "span" event is not
 * sampled; hand everything else to Writer.log_span. */
static PyObject *
writer_write_span(Writer *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (self->span_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "runlines: this run's writer was collected");
        return NULL;
    }
    if (nargs != 6 || !self->enabled || self->fds == Py_None) {
        return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
    }
    PyObject *name = args[0], *duration = args[1], *parent = args[2], *status = args[3];
    PyObject *exc_type = args[4], *fields = args[5];
    /* a non-finite duration is written as null with its `_nonfinite` mark: Python does that */
    if (!PyDict_CheckExact(fields) || PyDict_GET_SIZE(fields) != 0 ||
        !PyUnicode_CheckExact(name) || !PyUnicode_CheckExact(status) ||
        (exc_type != Py_None && !PyUnicode_CheckExact(exc_type)) ||
        !PyFloat_CheckExact(duration) || !isfinite(PyFloat_AS_DOUBLE(duration))) {
        return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
    }
    if (PyDict_GET_SIZE(self->samplers) != 0) {
        int sampled = PyDict_Contains(self->samplers, str_span);
        if (sampled != 0) {
            if (sampled < 0) {
                PyErr_Clear();
            }
            return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
        }
    }
    PyObject *safe_name = PyDict_GetItemWithError(self->span_names, name); /* borrowed */
    PyObject *safe_parent = Py_None;
    if (parent != Py_None) {
        safe_parent = PyDict_GetItemWithError(self->span_names, parent);
    }
    if (safe_name == NULL || safe_parent == NULL) {
        PyErr_Clear(); /* a name not seen before: Python redacts it and remembers */
        return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
    }
    PyObject *record = record_head(self, str_span, 5, 0);
    if (record == DECLINE) {
        return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
    }
    if (record == NULL) {
        return NULL;
    }
    int bad = PyDict_SetItem(record, str_name, safe_name);
    bad = bad || PyDict_SetItem(record, str_duration_s, duration);
    if (parent != Py_None) {
        bad = bad || PyDict_SetItem(record, str_parent, safe_parent);
    }
    bad = bad || PyDict_SetItem(record, str_status, status);
    if (exc_type != Py_None) {
        bad = bad || PyDict_SetItem(record, str_exc_type, exc_type);
    }
    if (bad) {
        Py_DECREF(record);
        return NULL;
    }
    PyObject *written = writer_write_record(self, record);
    Py_DECREF(record);
    if (written == Py_False) {
        Py_DECREF(written);
        return PyObject_Vectorcall(self->span_slow, args, nargs, NULL);
    }
    if (written == NULL) {
        return NULL;
    }
    Py_DECREF(written);
    self->hits++;
    Py_RETURN_NONE;
}

static PyObject *
writer_get_writing(Writer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->writing);
}

static PyObject *
writer_get_hits(Writer *self, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(self->hits);
}

static PyObject *
writer_forget(Writer *self, PyObject *Py_UNUSED(ignored))
{
    writer_forget_all(self);
    Py_RETURN_NONE;
}

static PyObject *
writer_get_wrapped(Writer *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->slow);
}

static PyObject *
writer_get_doc(Writer *self, void *Py_UNUSED(closure))
{
    return PyObject_GetAttrString(self->slow, "__doc__");
}

static PyObject *
writer_get_enabled(Writer *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->enabled && self->fds != NULL && self->fds != Py_None);
}

static PyObject *writer_set_spans(Writer *self, PyObject *args, PyObject *kwds);
static PyObject *writer_span(Writer *self, PyObject *const *args, size_t nargsf,
                             PyObject *kwnames);

static PyMethodDef writer_methods[] = {
    {"set_spans", (PyCFunction)(void (*)(void))writer_set_spans, METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("set_spans(span_type, core, slow): make spans of the run's tracer")},
    {"span", (PyCFunction)(void (*)(void))writer_span, METH_FASTCALL | METH_KEYWORDS,
     PyDoc_STR("span($self, name, /, **fields)\n--\n\n"
               "Time a block or a function: `with run.span(\"eval\"):` or "
               "`@run.span(\"step\")`.\n\nRun.span without its call frame; see Run.span.")},
    {"configure", (PyCFunction)(void (*)(void))writer_configure, METH_VARARGS | METH_KEYWORDS,
     PyDoc_STR("configure(enabled, fds, flush, next_check, samplers): follow the run")},
    {"write_record", (PyCFunction)writer_write_record, METH_O,
     PyDoc_STR("write_record(record): encode and write a record of runlines' own; False when "
               "the run closed meanwhile and nothing was written")},
    {"write_span", (PyCFunction)(void (*)(void))writer_write_span, METH_FASTCALL,
     PyDoc_STR("write_span(name, duration_s, parent, status, exc_type, fields)")},
    {"forget", (PyCFunction)writer_forget, METH_NOARGS,
     PyDoc_STR("forget(): drop every learned plan (the run changed one)")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"__wrapped__", (getter)writer_get_wrapped, NULL, NULL, NULL},
    {"__doc__", (getter)writer_get_doc, NULL, NULL, NULL},
    {"enabled", (getter)writer_get_enabled, NULL, NULL, NULL},
    {"hits", (getter)writer_get_hits, NULL, NULL, NULL},
    {"writing", (getter)writer_get_writing, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runlines._speedups.speedups.Writer",
    .tp_basicsize = sizeof(Writer),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_vectorcall_offset = offsetof(Writer, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_new = writer_new,
};

/* ---- Spans --------------------------------------------------------------------------------
 * SpanBase is spans.Span's __enter__ and __exit__, as spans.py's _PySpanBase has them: the
 * same stack of open spans per thread, the same totals, the same call of the tracer's emit.
 */

typedef struct {
    PyObject_HEAD
    PyObject *core;   /* the tracer's core list, read by position: see spans.py's _Core */
    PyObject *name;
    PyObject *fields;
    PyObject *parent; /* the enclosing span's name, or None */
    PyObject *thread; /* (stack, totals) of the thread that entered, while open */
    double start;
    int open;
} SpanBase;

enum { CORE_THREADS, CORE_NEW_THREAD, CORE_CLOCK, CORE_EMIT, CORE_SIZE }; /* spans.py's order */

static PyTypeObject SpanBaseType;
static PyObject *str_ok;
static PyObject *str_failed;
static PyObject *str_interrupted;
static PyObject *str___name__;
static PyObject *int_one;

static int
spanbase_init(SpanBase *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"core", "name", "fields", NULL};
    PyObject *core, *name, *fields;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OO:Span", kwlist, &PyList_Type, &core, &name,
                                     &fields)) {
        return -1;
    }
    if (PyList_GET_SIZE(core) != CORE_SIZE) {
        PyErr_SetString(PyExc_TypeError, "a span's core is [threads, new_thread, clock, emit]");
        return -1;
    }
    Py_XSETREF(self->core, Py_NewRef(core));
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->fields, Py_NewRef(fields));
    Py_XSETREF(self->parent, Py_NewRef(Py_None));
    Py_CLEAR(self->thread);
    self->open = 0;
    return 0;
}

/* The core's item at index, a new reference (the list's size is checked at init). */
static PyObject *
core_item(SpanBase *self, Py_ssize_t index)
{
    return Py_NewRef(PyList_GET_ITEM(self->core, index));
}

/* Call the tracer's clock. */
static int
span_clock(SpanBase *self, double *now)
{
    PyObject *clock = core_item(self, CORE_CLOCK);
    PyObject *value = PyObject_CallNoArgs(clock);
    Py_DECREF(clock);
    if (value == NULL) {
        return -1;
    }
    *now = PyFloat_AsDouble(value);
    Py_DECREF(value);
    return (*now == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *
spanbase_enter(SpanBase *self, PyObject *Py_UNUSED(ignored))
{
    if (self->open) {
        PyErr_Format(PyExc_RuntimeError,
                     "span %R is already open; a Span times one block at a time, call span(%R) "
                     "again for a nested or concurrent block",
                     self->name, self->name);
        return NULL;
    }
    if (self->core == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Span.__init__() was not called");
        return NULL;
    }
    PyObject *threads = core_item(self, CORE_THREADS);
    if (!PyDict_Check(threads)) {
        Py_DECREF(threads);
        PyErr_SetString(PyExc_TypeError, "a span core's threads must be a dict");
        return NULL;
    }
    PyObject *ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (ident == NULL) {
        Py_DECREF(threads);
        return NULL;
    }
    PyObject *thread = PyDict_GetItemWithError(threads, ident); /* borrowed */
    Py_DECREF(ident);
    Py_DECREF(threads);
    if (thread != NULL) {
        Py_INCREF(thread);
    }
    else if (PyErr_Occurred()) {
        return NULL;
    }
    else {
        PyObject *new_thread = core_item(self, CORE_NEW_THREAD);
        thread = PyObject_CallNoArgs(new_thread);
        Py_DECREF(new_thread);
        if (thread == NULL) {
            return NULL;
        }
    }
    if (!PyTuple_CheckExact(thread) || PyTuple_GET_SIZE(thread) != 2 ||
        !PyList_Check(PyTuple_GET_ITEM(thread, 0)) || !PyDict_Check(PyTuple_GET_ITEM(thread, 1))) {
        Py_DECREF(thread);
        PyErr_SetString(PyExc_TypeError, "a thread's spans must be a (list, dict) tuple");
        return NULL;
    }
    PyObject *stack = PyTuple_GET_ITEM(thread, 0); /* borrowed */
    PyObject *parent = Py_None;
    Py_ssize_t depth = PyList_GET_SIZE(stack);
    PyObject *top = depth > 0 ? PyList_GET_ITEM(stack, depth - 1) : NULL;
    if (top != NULL && PyObject_TypeCheck(top, &SpanBaseType) && ((SpanBase *)top)->name) {
        parent = ((SpanBase *)top)->name;
    }
    Py_INCREF(parent);
    if (PyList_Append(stack, (PyObject *)self) < 0) {
        Py_DECREF(parent);
        Py_DECREF(thread);
        return NULL;
    }
    Py_XSETREF(self->parent, parent);
    Py_XSETREF(self->thread, thread);
    if (span_clock(self, &self->start) < 0) {
        return NULL;
    }
    self->open = 1;
    return Py_NewRef(self);
}

/* Take self off its thread's stack: the top normally, anywhere when closed out of order. */
static int
span_pop(SpanBase *self, PyObject *stack)
{
    Py_ssize_t depth = PyList_GET_SIZE(stack);
    if (depth > 0 && PyList_GET_ITEM(stack, depth - 1) == (PyObject *)self) {
        return PyList_SetSlice(stack, depth - 1, depth, NULL);
    }
    for (Py_ssize_t i = depth - 2; i >= 0; i--) {
        if (PyList_GET_ITEM(stack, i) == (PyObject *)self) {
            return PyList_SetSlice(stack, i, i + 1, NULL);
        }
    }
    return 0;
}

/* totals[name] = [count, total_s, max_s], as SpanStats.add() keeps them. */
static int
span_count(PyObject *totals, PyObject *name, PyObject *duration_obj, double duration)
{
    PyObject *acc = PyDict_GetItemWithError(totals, name); /* borrowed */
    if (acc == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        PyObject *fresh = PyList_New(3);
        if (fresh == NULL) {
            return -1;
        }
        PyList_SET_ITEM(fresh, 0, PyLong_FromLong(1));
        PyList_SET_ITEM(fresh, 1, Py_NewRef(duration_obj));
        PyList_SET_ITEM(fresh, 2, Py_NewRef(duration_obj));
        int done = PyList_GET_ITEM(fresh, 0) == NULL ? -1 : PyDict_SetItem(totals, name, fresh);
        Py_DECREF(fresh);
        return done;
    }
    if (!PyList_Check(acc) || PyList_GET_SIZE(acc) != 3) {
        PyErr_SetString(PyExc_TypeError, "span totals must be [count, total_s, max_s] lists");
        return -1;
    }
    PyObject *count = PyNumber_Add(PyList_GET_ITEM(acc, 0), int_one);
    if (count == NULL) {
        return -1;
    }
    PyList_SetItem(acc, 0, count); /* steals count */
    PyObject *total = PyNumber_Add(PyList_GET_ITEM(acc, 1), duration_obj);
    if (total == NULL) {
        return -1;
    }
    PyList_SetItem(acc, 1, total);
    double peak = PyFloat_AsDouble(PyList_GET_ITEM(acc, 2));
    if (peak == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (duration > peak) {
        PyList_SetItem(acc, 2, Py_NewRef(duration_obj));
    }
    return 0;
}

static PyObject *
spanbase_exit(SpanBase *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ expected 3 arguments, got %zd", nargs);
        return NULL;
    }
    if (!self->open || self->thread == NULL) {
        PyErr_Format(PyExc_RuntimeError, "span %R is not open: use it in a 'with' block",
                     self->name);
        return NULL;
    }
    double end;
    if (span_clock(self, &end) < 0) {
        return NULL;
    }
    /* Not rounded: rounding would cost a sixth of the span (summary() rounds). */
    double duration = end - self->start;
    self->open = 0;
    PyObject *thread = self->thread; /* owned: released at the end */
    self->thread = NULL;
    PyObject *duration_obj = NULL, *status = NULL, *exc_name = NULL, *emit = NULL;
    PyObject *result = NULL;
    /* enter checked: a (list, dict) tuple */
    if (span_pop(self, PyTuple_GET_ITEM(thread, 0)) < 0) {
        goto done;
    }
    duration_obj = PyFloat_FromDouble(duration);
    if (duration_obj == NULL ||
        span_count(PyTuple_GET_ITEM(thread, 1), self->name, duration_obj, duration) < 0) {
        goto done;
    }
    PyObject *exc_type = args[0];
    if (exc_type == Py_None) {
        status = Py_NewRef(str_ok);
        exc_name = Py_NewRef(Py_None);
    }
    else {
        status = Py_NewRef(exc_type == PyExc_KeyboardInterrupt ? str_interrupted : str_failed);
        exc_name = PyObject_GetAttr(exc_type, str___name__);
        if (exc_name == NULL) {
            goto done;
        }
    }
    emit = core_item(self, CORE_EMIT);
    PyObject *emit_args[6] = {self->name, duration_obj, self->parent, status, exc_name,
                              self->fields};
    PyObject *emitted = PyObject_Vectorcall(emit, emit_args, 6, NULL);
    if (emitted == NULL) {
        goto done;
    }
    Py_DECREF(emitted);
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(thread);
    Py_XDECREF(duration_obj);
    Py_XDECREF(status);
    Py_XDECREF(exc_name);
    Py_XDECREF(emit);
    return result;
}

static PyObject *
spanbase_get_start(SpanBase *self, void *Py_UNUSED(closure))
{
    if (!self->open) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(self->start);
}

static PyObject *
spanbase_get_object(PyObject *value)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "Span.__init__() was not called");
        return NULL;
    }
    return Py_NewRef(value);
}

static PyObject *
spanbase_get_core(SpanBase *self, void *Py_UNUSED(closure))
{
    return spanbase_get_object(self->core);
}

static PyObject *
spanbase_get_name(SpanBase *self, void *Py_UNUSED(closure))
{
    return spanbase_get_object(self->name);
}

static PyObject *
spanbase_get_fields(SpanBase *self, void *Py_UNUSED(closure))
{
    return spanbase_get_object(self->fields);
}

static PyObject *
spanbase_get_parent(SpanBase *self, void *Py_UNUSED(closure))
{
    return spanbase_get_object(self->parent);
}

static int
spanbase_traverse(SpanBase *self, visitproc visit, void *arg)
{
    Py_VISIT(self->core);
    Py_VISIT(self->name);
    Py_VISIT(self->fields);
    Py_VISIT(self->parent);
    Py_VISIT(self->thread);
    return 0;
}

static int
spanbase_clear(SpanBase *self)
{
    Py_CLEAR(self->core);
    Py_CLEAR(self->name);
    Py_CLEAR(self->fields);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->thread);
    return 0;
}

static void
spanbase_dealloc(SpanBase *self)
{
    PyObject_GC_UnTrack(self);
    spanbase_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef spanbase_methods[] = {
    {"__enter__", (PyCFunction)spanbase_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))spanbase_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef spanbase_getset[] = {
    {"_core", (getter)spanbase_get_core, NULL, NULL, NULL},
    {"_name", (getter)spanbase_get_name, NULL, NULL, NULL},
    {"_fields", (getter)spanbase_get_fields, NULL, NULL, NULL},
    {"_parent", (getter)spanbase_get_parent, NULL, NULL, NULL},
    {"_start", (getter)spanbase_get_start, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SpanBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runlines._speedups.speedups.SpanBase",
    .tp_basicsize = sizeof(SpanBase),
    .tp_dealloc = (destructor)spanbase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = PyDoc_STR("__enter__ and __exit__ of spans.Span, in C"),
    .tp_traverse = (traverseproc)spanbase_traverse,
    .tp_clear = (inquiry)spanbase_clear,
    .tp_methods = spanbase_methods,
    .tp_getset = spanbase_getset,
    .tp_init = (initproc)spanbase_init,
    .tp_new = PyType_GenericNew,
};

/* ---- The span factory: Run.span for a span without fields ----------------------------- */

static PyObject *
writer_set_spans(Writer *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"span_type", "core", "slow", NULL};
    PyObject *span_type, *core, *slow;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O:set_spans", kwlist, &PyType_Type,
                                     &span_type, &PyList_Type, &core, &slow)) {
        return NULL;
    }
    if (PyList_GET_SIZE(core) != CORE_SIZE) {
        PyErr_SetString(PyExc_TypeError, "a span's core is [threads, new_thread, clock, emit]");
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)span_type, &SpanBaseType)) {
        PyErr_SetString(PyExc_TypeError, "span_type must be a subclass of SpanBase");
        return NULL;
    }
    Py_XSETREF(self->span_type, (PyTypeObject *)Py_NewRef(span_type));
    Py_XSETREF(self->core, Py_NewRef(core));
    Py_XSETREF(self->span_factory_slow, Py_NewRef(slow));
    Py_RETURN_NONE;
}

static PyObject *
writer_span(Writer *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->span_type == NULL || nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames)) ||
        !PyUnicode_CheckExact(args[0]) || PyUnicode_GET_LENGTH(args[0]) == 0) {
        if (self->span_factory_slow == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "runlines: span() before set_spans()");
            return NULL;
        }
        return PyObject_Vectorcall(self->span_factory_slow, args, nargsf, kwnames);
    }
    SpanBase *span = (SpanBase *)self->span_type->tp_alloc(self->span_type, 0);
    if (span == NULL) {
        return NULL;
    }
    span->core = Py_NewRef(self->core);
    span->name = Py_NewRef(args[0]);
    span->fields = PyDict_New(); /* its own, as Span(core, name, {}) would have */
    span->parent = Py_NewRef(Py_None);
    if (span->fields == NULL) {
        Py_DECREF(span);
        return NULL;
    }
    return (PyObject *)span;
}

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "runlines._speedups.speedups",
    .m_doc = "The fast path of Run.log for records of plain numbers (see _writer.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit_speedups(void)
{
    str_ndim = PyUnicode_InternFromString("ndim");
    str_item = PyUnicode_InternFromString("item");
    str_ts = PyUnicode_InternFromString("ts");
    str_event = PyUnicode_InternFromString("event");
    str_run = PyUnicode_InternFromString("run");
    str_rank = PyUnicode_InternFromString("rank");
    str_span = PyUnicode_InternFromString("span");
    str_name = PyUnicode_InternFromString("name");
    str_duration_s = PyUnicode_InternFromString("duration_s");
    str_parent = PyUnicode_InternFromString("parent");
    str_status = PyUnicode_InternFromString("status");
    str_exc_type = PyUnicode_InternFromString("exc_type");
    if (!str_ndim || !str_item || !str_ts || !str_event || !str_run || !str_rank ||
        !str_span || !str_name || !str_duration_s || !str_parent || !str_status || !str_exc_type) {
        return NULL;
    }
    if (PyType_Ready(&WriterType) < 0 || PyType_Ready(&SpanBaseType) < 0) {
        return NULL;
    }
    str_ok = PyUnicode_InternFromString("ok");
    str_failed = PyUnicode_InternFromString("failed");
    str_interrupted = PyUnicode_InternFromString("interrupted");
    str___name__ = PyUnicode_InternFromString("__name__");
    int_one = PyLong_FromLong(1);
    if (!str_ok || !str_failed ||
        !str_interrupted || !str___name__ || !int_one) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&SpanBaseType);
    if (PyModule_AddObject(module, "SpanBase", (PyObject *)&SpanBaseType) < 0) {
        Py_DECREF(&SpanBaseType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
