/*
 * _tki_stream.c: the stream encoder and the bounded calls (count with a limit,
 * encode with max_tokens, truncate) as functions that take Python objects,
 * so that each is one C call from Python.  Included by _tki_python.c, whose
 * helpers (list_of_ids, utf8_of, ...) it uses.
 *
 * A stream encoder is a capsule that owns the tki_stream (freed with the
 * capsule) and keeps alive the Python object that owns its vocabulary and
 * special-token matchers; its functions are bound to the capsule.  A stream
 * is for one thread at a time: the C stream refuses a second caller
 * (TKI_ERR_BUSY), which is raised here as RuntimeError, so two threads
 * feeding one stream get an exception, never a corrupted stream.  Other
 * failures leave the stream failed; the functions then return None and the
 * Python layer reads info() to raise the error that tiktoken would (its
 * disallowed-special message, the UTF-8 error with its offset).
 *
 * Nothing here keeps state between calls outside the stream itself: a call
 * interrupted by a signal handler or a finalizer that encodes on the same
 * thread cannot have its ids changed by it.
 */
#define STREAM_CAPSULE "tiktoken_inc._tki.stream"

/* A call's ids go on the stack when few, else to this thread's feed array
 * (_tki_python.c: feed_scratch_take) when they fit it, else to an array of
 * their own. */

typedef struct stream_binding {
    tki_stream *stream;
    PyObject *owner;
} stream_binding;

static void stream_binding_free(PyObject *capsule)
{
    stream_binding *bound = PyCapsule_GetPointer(capsule, STREAM_CAPSULE);
    if (bound == NULL) return;
    tki_stream_free(bound->stream);
    Py_XDECREF(bound->owner);
    PyMem_Free(bound);
}

static stream_binding *binding_of_stream(PyObject *capsule)
{
    return PyCapsule_GetPointer(capsule, STREAM_CAPSULE);
}

static tki_stream *stream_of(PyObject *capsule)
{
    stream_binding *bound = binding_of_stream(capsule);
    return bound != NULL ? bound->stream : NULL;
}

/* The result of a stream call: its ids, None when it failed (info() says why),
 * or an exception for what the caller did wrong (another thread is using it). */
static PyObject *stream_result(int32_t status, const uint32_t *ids, size_t count)
{
    if (status == TKI_OK) return list_of_ids(ids, count);
    if (status == TKI_ERR_BUSY) {
        PyErr_SetString(PyExc_RuntimeError,
                        "this stream encoder is in use by another thread: a stream encoder is for one "
                        "thread at a time (make one per thread with enc.stream_encoder())");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Where a call's ids go: on the stack, in this thread's feed array, or allocated. */
typedef struct stream_ids {
    uint32_t *ids;
    size_t capacity;
    uint32_t *heap;         /* allocated for this call (to free), or NULL          */
    PyObject *feed_owner;   /* ids is the thread's feed array (to give back), or NULL */
} stream_ids;

/* Ids for a call that feeds `length` bytes: on the stack when few, else in this thread's
 * feed array when they fit it, else allocated.  NULL with an exception set.  Needs the GIL. */
static uint32_t *stream_output(stream_binding *bound, size_t length, uint32_t *stack, size_t stack_size,
                               stream_ids *out)
{
    uint64_t pending = tki_stream_pending(bound->stream);
    out->heap = NULL;
    out->feed_owner = NULL;
    if (pending > SIZE_MAX / sizeof(uint32_t) - length - 1) {
        PyErr_NoMemory();
        return NULL;
    }
    out->capacity = (size_t)pending + length + 1;
    if (out->capacity <= stack_size) return out->ids = stack;
    if (out->capacity <= FEED_SCRATCH_IDS) return out->ids = feed_scratch_take(&out->feed_owner);
    out->heap = PyMem_RawMalloc(out->capacity * sizeof(uint32_t));
    if (out->heap == NULL) PyErr_NoMemory();
    return out->ids = out->heap;
}

/* Gives back what stream_output took.  Needs the GIL. */
static void stream_output_done(stream_ids *out)
{
    PyMem_RawFree(out->heap);
    if (out->feed_owner != NULL) feed_scratch_give_back(out->feed_owner, out->ids);
}

/*
 * feed(chunk, is_utf8=False) -> list[int] | None.  chunk: a str (its UTF-8),
 * or bytes-like (checked as UTF-8 unless is_utf8).  None: the stream failed,
 * or the str has lone surrogates and nothing was fed (info()'s status tells
 * which: 0 for the latter).
 */
static PyObject *stream_feed(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs)
{
    stream_binding *bound = binding_of_stream(capsule);
    if (bound == NULL) return NULL;
    tki_stream *stream = bound->stream;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "feed(chunk, is_utf8=False)");
        return NULL;
    }
    int is_utf8 = nargs == 2 ? PyObject_IsTrue(args[1]) : 0;
    if (is_utf8 < 0) return NULL;
    PyObject *chunk = args[0];
    Py_buffer view = {0};
    const char *data = NULL;
    Py_ssize_t length = 0;
    int have_view = 0;
    if (PyUnicode_Check(chunk)) {
        int kept = kept_utf8(chunk, &data, &length);
        if (kept <= 0) {
            if (kept < 0) return NULL;
            Py_RETURN_NONE; /* lone surrogates: the caller replaces them, then feeds bytes */
        }
        is_utf8 = 1;
    } else if (PyObject_CheckBuffer(chunk)) {
        if (PyObject_GetBuffer(chunk, &view, PyBUF_SIMPLE) != 0) return NULL;
        have_view = 1;
        data = view.buf;
        length = view.len;
    } else {
        PyErr_Format(PyExc_TypeError, "feed() takes str or bytes, not %.100s", Py_TYPE(chunk)->tp_name);
        return NULL;
    }
    uint32_t stack[STACK_IDS];
    stream_ids out;
    size_t count = 0;
    uint32_t *ids = stream_output(bound, (size_t)length, stack, STACK_IDS, &out);
    PyObject *result = NULL;
    if (ids != NULL) {
        int32_t status;
        if (length >= GIL_FREE_MIN_BYTES) {
            Py_BEGIN_ALLOW_THREADS
            status = tki_stream_feed_checked(stream, (const uint8_t *)data, (size_t)length, is_utf8, ids,
                                             out.capacity, &count);
            Py_END_ALLOW_THREADS
        } else {
            status = tki_stream_feed_checked(stream, (const uint8_t *)data, (size_t)length, is_utf8, ids,
                                             out.capacity, &count);
        }
        result = stream_result(status, ids, count);
    }
    stream_output_done(&out);
    if (have_view) PyBuffer_Release(&view);
    return result;
}

/* finish() -> list[int] | None: the rest of the ids; the stream is then empty. */
static PyObject *stream_finish(PyObject *capsule, PyObject *unused)
{
    (void)unused;
    stream_binding *bound = binding_of_stream(capsule);
    if (bound == NULL) return NULL;
    uint32_t stack[STACK_IDS];
    stream_ids out;
    size_t count = 0;
    uint32_t *ids = stream_output(bound, 0, stack, STACK_IDS, &out);
    PyObject *result = NULL;
    if (ids != NULL) {
        int32_t status;
        Py_BEGIN_ALLOW_THREADS
        status = tki_stream_finish(bound->stream, ids, out.capacity, &count);
        Py_END_ALLOW_THREADS
        result = stream_result(status, ids, count);
    }
    stream_output_done(&out);
    return result;
}

/* info() -> (status, reason, offset, byte, special_string, bytes_fed, tokens_emitted,
 * pending_bytes, max_pending_bytes, live_ends). */
static PyObject *stream_info(PyObject *capsule, PyObject *unused)
{
    (void)unused;
    tki_stream *stream = stream_of(capsule);
    if (stream == NULL) return NULL;
    tki_stream_error error;
    tki_stream_stats stats;
    tki_stream_get_error(stream, &error);
    tki_stream_get_stats(stream, &stats);
    return Py_BuildValue("(iIKIIKKKKK)", (int)error.status, (unsigned int)error.reason,
                         (unsigned long long)error.offset, (unsigned int)error.byte,
                         (unsigned int)error.special_string, (unsigned long long)stats.bytes_fed,
                         (unsigned long long)stats.tokens_emitted, (unsigned long long)stats.pending_bytes,
                         (unsigned long long)stats.max_pending_bytes, (unsigned long long)stats.live_ends);
}

static PyMethodDef stream_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))stream_feed, METH_FASTCALL, "feed(chunk, is_utf8=False)"},
    {"finish", stream_finish, METH_NOARGS, "finish()"},
    {"info", stream_info, METH_NOARGS, "info()"},
};

/* The pointer at the int args[i], or -1 with an exception set. */
static int address_at(PyObject *const *args, Py_ssize_t i, void **out)
{
    *out = PyLong_AsVoidPtr(args[i]);
    return PyErr_Occurred() ? -1 : 0;
}

/* A new C stream: a compiled pattern's when `compiled` is not NULL, else `pattern`'s. */
static int32_t new_stream(const tki_vocab *vocab, int32_t pattern, const tki_pattern *compiled,
                          const tki_special_matcher *allowed, const tki_special_matcher *refused, uint32_t flags,
                          tki_stream **out)
{
    return compiled != NULL ? tki_stream_new_compiled(vocab, compiled, allowed, refused, flags, out)
                            : tki_stream_new_with_specials(vocab, pattern, allowed, refused, flags, out);
}

/* stream_encoder(vocab_address, pattern, compiled_address, allowed_address, refused_address, flags,
 * owner) -> (feed, finish, info).  compiled_address: a tki_pattern, or 0 for `pattern`. */
static PyObject *module_stream_encoder(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "stream_encoder(vocab_address, pattern, compiled_address, "
                                         "allowed_address, refused_address, flags, owner)");
        return NULL;
    }
    void *vocab = NULL, *compiled = NULL, *allowed = NULL, *refused = NULL;
    if (address_at(args, 0, &vocab) || address_at(args, 2, &compiled) || address_at(args, 3, &allowed) ||
        address_at(args, 4, &refused)) {
        return NULL;
    }
    long pattern = PyLong_AsLong(args[1]);
    unsigned long flags = PyLong_AsUnsignedLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    tki_stream *stream = NULL;
    int32_t status = new_stream(vocab, (int32_t)pattern, compiled, allowed, refused, (uint32_t)flags, &stream);
    if (status != TKI_OK) return raise_status(status);
    stream_binding *bound = PyMem_Malloc(sizeof *bound);
    if (bound == NULL) {
        tki_stream_free(stream);
        return PyErr_NoMemory();
    }
    bound->stream = stream;
    Py_INCREF(args[6]);
    bound->owner = args[6];
    PyObject *capsule = PyCapsule_New(bound, STREAM_CAPSULE, stream_binding_free);
    if (capsule == NULL) {
        tki_stream_free(stream);
        Py_DECREF(args[6]);
        PyMem_Free(bound);
        return NULL;
    }
    PyObject *functions = PyTuple_New(3);
    for (Py_ssize_t i = 0; functions != NULL && i < 3; i++) {
        PyObject *function = PyCFunction_New(&stream_methods[i], capsule);
        if (function == NULL) {
            Py_CLEAR(functions);
            break;
        }
        PyTuple_SET_ITEM(functions, i, function);
    }
    Py_DECREF(capsule);
    return functions;
}

/*
 * The UTF-8 of a str made as a bounded call reads it (a tki_text_source).  A
 * call with a cap reads a prefix of a long text, but CPython makes the UTF-8
 * of a str that is not ASCII whole on first use, and keeps it in the str: for
 * a fresh 64 MiB str, count_tokens(text, limit=100_000) converted all 64 MiB
 * (~100 ms) to read 460 KB (~3 ms).  This converts whole characters, a block
 * ahead of what the stream reads, without the GIL (a str does not change).
 * A lone surrogate stops it (`surrogate`): the call then takes the whole
 * text's UTF-8 as tiktoken makes it.
 */
#define LAZY_MIN_CHARACTERS ((Py_ssize_t)1 << 16) /* shorter: made whole, as before */

typedef struct str_utf8 {
    int kind;                /* PyUnicode_KIND: 1, 2 or 4 bytes a character   */
    const void *characters;  /* PyUnicode_DATA                                */
    size_t count;            /* the str's characters                          */
    size_t converted;        /* the characters converted so far               */
    uint8_t *bytes;          /* their UTF-8 (PyMem_Raw), bytes[0..length)     */
    size_t length, capacity;
    int surrogate;           /* a lone surrogate was met: stopped             */
} str_utf8;

/* Whether a bounded call with this cap reads `text` with a str_utf8: a long str that is not
 * ASCII, whose UTF-8 CPython has not made yet, and that the cap may stop short of its end. */
static int reads_lazily(PyObject *text, uint64_t cap)
{
    if (cap == UINT64_MAX || !PyUnicode_Check(text) || !utf8_not_made(text)) return 0;
    Py_ssize_t count = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    uint64_t most = (uint64_t)count * utf8_most_per_character(kind);
    return count >= LAZY_MIN_CHARACTERS && cap < most;
}

static void str_utf8_begin(str_utf8 *text, PyObject *str)
{
    memset(text, 0, sizeof(*text));
    text->kind = PyUnicode_KIND(str);
    text->characters = PyUnicode_DATA(str);
    text->count = (size_t)PyUnicode_GET_LENGTH(str);
}

/* tki_text_source.more for a str_utf8: converts characters until `wanted` bytes are
 * ready (at least 4096 characters a time), growing the buffer by doubling.  How many
 * characters make the bytes still wanted is guessed from the bytes a character has
 * made so far (at first: as many as a character of this kind can make), so that text
 * of three-byte characters is not converted three times as far as it is read; a guess
 * short of it converts again. */
static int32_t str_utf8_more(void *context, size_t wanted, const uint8_t **data, size_t *length, int32_t *complete)
{
    str_utf8 *text = context;
    while (text->length < wanted && text->converted < text->count) {
        size_t most = utf8_most_per_character(text->kind);
        size_t missing = wanted - text->length;
        size_t chunk = text->length > 0 ? (size_t)((double)missing * (double)text->converted / (double)text->length) + 1
                                        : missing / most + 1;
        if (chunk < 4096) chunk = 4096;
        if (chunk > text->count - text->converted) chunk = text->count - text->converted;
        if (chunk > (SIZE_MAX - text->length - 8) / most) return TKI_ERR_NOMEM;
        size_t room = text->length + chunk * most + 8;
        if (room > text->capacity) {
            size_t capacity = text->capacity <= SIZE_MAX / 2 && text->capacity * 2 > room ? text->capacity * 2 : room;
            uint8_t *grown = PyMem_RawRealloc(text->bytes, capacity);
            if (grown == NULL) return TKI_ERR_NOMEM;
            text->bytes = grown;
            text->capacity = capacity;
        }
        size_t made = characters_to_utf8(text->kind, text->characters, text->converted, chunk,
                                         text->bytes + text->length);
        if (made == SIZE_MAX) {
            text->surrogate = 1;
            return TKI_ERR_ARGUMENT;
        }
        text->length += made;
        text->converted += chunk;
    }
    *data = text->bytes;
    *length = text->length;
    *complete = text->converted == text->count;
    return TKI_OK;
}

/*
 * The UTF-8 of a str for the bounded calls: CPython's own (*holder NULL), or,
 * with lone surrogates, a bytes object made as tiktoken makes it (*holder, to
 * release).  *had_surrogates tells which.
 */
static const char *bounded_text(PyObject *text, Py_ssize_t *length, PyObject **holder, int *had_surrogates)
{
    *holder = NULL;
    *had_surrogates = 0;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected a str, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    const char *data = NULL;
    int kept = kept_utf8(text, &data, length);
    if (kept != 0) return data; /* (NULL when kept < 0) */
    *holder = module_utf8_replacing_surrogates(NULL, text);
    if (*holder == NULL) return NULL;
    *had_surrogates = 1;
    *length = PyBytes_GET_SIZE(*holder);
    return PyBytes_AS_STRING(*holder);
}

/* The arguments every bounded call starts with: vocab, pattern, compiled, allowed, refused, text, cap. */
typedef struct bounded_arguments {
    const tki_vocab *vocab;
    int32_t pattern;
    const tki_pattern *compiled;
    const tki_special_matcher *allowed, *refused;
    const char *data;
    Py_ssize_t length;
    PyObject *holder;
    int had_surrogates;
    uint64_t cap;
    PyObject *text;       /* the str (borrowed)                                    */
    int lazy;             /* read with a str_utf8 (data NULL until whole_text)     */
} bounded_arguments;

/* call->data..had_surrogates: the whole text's UTF-8 (a lazy call that met a lone surrogate
 * goes on this way).  -1 with an exception set on failure. */
static int whole_text(bounded_arguments *call)
{
    call->lazy = 0;
    call->data = bounded_text(call->text, &call->length, &call->holder, &call->had_surrogates);
    return call->data == NULL ? -1 : 0;
}

/* What bounded_call and the truncate path return besides a tki status: a Python exception is
 * set; a lazy call met a lone surrogate (it goes on with whole_text). */
#define STATUS_PYTHON_ERROR ((int32_t)-1)
#define STATUS_SURROGATE ((int32_t)-2)

static int read_bounded_arguments(PyObject *const *args, bounded_arguments *out)
{
    void *vocab = NULL, *compiled = NULL, *allowed = NULL, *refused = NULL;
    if (address_at(args, 0, &vocab) || address_at(args, 2, &compiled) || address_at(args, 3, &allowed) ||
        address_at(args, 4, &refused)) {
        return -1;
    }
    long pattern = PyLong_AsLong(args[1]);
    if (PyErr_Occurred()) return -1;
    if (vocab == NULL || pattern < 0 || pattern > TKI_PATTERN_O200K) { /* (0 with a compiled pattern) */
        PyErr_SetString(PyExc_ValueError, "bounded call: no vocabulary, or not a built-in pattern");
        return -1;
    }
    out->vocab = vocab;
    out->pattern = (int32_t)pattern;
    out->compiled = compiled;
    out->allowed = allowed;
    out->refused = refused;
    if (args[6] == Py_None) {
        out->cap = UINT64_MAX;
    } else {
        out->cap = PyLong_AsUnsignedLongLong(args[6]);
        if (PyErr_Occurred()) return -1;
        if (out->cap == UINT64_MAX) {
            PyErr_SetString(PyExc_OverflowError, "the limit is too large");
            return -1;
        }
    }
    out->text = args[5];
    out->lazy = reads_lazily(args[5], out->cap);
    out->data = NULL;
    out->length = 0;
    out->holder = NULL;
    out->had_surrogates = 0;
    return out->lazy ? 0 : whole_text(out);
}

/* A bounded call's failure: the refused string's index (an int, for the caller's
 * tiktoken error), or an exception. */
static PyObject *bounded_failure(int32_t status, const tki_stream_error *error)
{
    if (status == STATUS_PYTHON_ERROR) return NULL;
    if (status == TKI_ERR_REFUSED_SPECIAL) return PyLong_FromUnsignedLong(error->special_string);
    return raise_status(status);
}

/*
 * A bounded call whose answer needs the whole text anyway -- no cap, or a cap
 * the text cannot pass (an id covers a byte at least), or a text too short for
 * the difference to matter -- is one one-shot encode below
 * ONE_SHOT_BOUNDED_BYTES, as encode's own: a stream costs microseconds to set
 * up (its engine, its buffers) and reads the text with the pre-tokenizer's
 * matcher for text that may continue, which is slower.  Its ids take 4 bytes
 * per byte of text (4 MiB at most); a longer text goes through a stream in
 * blocks, in memory bounded by the block and the open piece.  A text holding
 * a refused string also goes through the stream, which tells which one it
 * reaches first (or stops at the cap before it).
 */
#define ONE_SHOT_BOUNDED_BYTES ((Py_ssize_t)1 << 20)
#define ONE_SHOT_SHORT_BYTES ((Py_ssize_t)1024)

/* What a bounded call returns in C: *ids (allocated, for the caller to free with
 * PyMem_RawFree, or NULL when not wanted), their count or cap + 1, whether the cap
 * was passed, the bytes read, and on TKI_ERR_REFUSED_SPECIAL which string. */
typedef struct bounded_result {
    uint32_t *ids;
    uint64_t count;
    int32_t exceeded;
    size_t consumed;
    tki_stream_error error;
} bounded_result;

/* The one-shot form (see above), for a text holding no refused string: its ids to *ids. */
static int32_t bounded_one_shot(const bounded_arguments *call, uint32_t **ids, bounded_result *result)
{
    size_t length = (size_t)call->length;
    *ids = PyMem_RawMalloc((length > 0 ? length : 1) * sizeof(uint32_t));
    if (*ids == NULL) return TKI_ERR_NOMEM;
    size_t count = 0;
    int32_t status = encode_with(call->vocab, call->pattern, call->compiled, call->allowed,
                                 (const uint8_t *)call->data, length, *ids, length, &count);
    if (status == TKI_OK) {
        result->exceeded = (uint64_t)count > call->cap;
        result->count = result->exceeded ? call->cap + 1 : (uint64_t)count;
        result->consumed = length;
    }
    return status;
}

/* The stream form: a stream fed the text in blocks until more than cap ids are
 * certain; the first cap + 1 ids to *ids if want_ids. */
static int32_t bounded_stream(const bounded_arguments *call, int want_ids, uint32_t **ids, bounded_result *result)
{
    if (want_ids) {
        size_t capacity = call->cap < (uint64_t)call->length ? (size_t)call->cap + 1 : (size_t)call->length + 1;
        *ids = PyMem_RawMalloc(capacity * sizeof(uint32_t));
        if (*ids == NULL) return TKI_ERR_NOMEM;
    }
    tki_stream *stream = NULL;
    int32_t status = new_stream(call->vocab, call->pattern, call->compiled, call->allowed, call->refused, 0, &stream);
    if (status == TKI_OK) {
        status = tki_stream_bounded(stream, (const uint8_t *)call->data, (size_t)call->length, call->cap, *ids,
                                    &result->count, &result->consumed, &result->exceeded);
        tki_stream_get_error(stream, &result->error);
    }
    tki_stream_free(stream);
    return status;
}

/* The form bounded_call chose: one-shot unless a refused string is in the text. */
static int32_t bounded_form(const bounded_arguments *call, int one_shot, int want_ids, uint32_t **ids,
                            bounded_result *result)
{
    int32_t holds = one_shot ? holds_string(call->refused, call->data, call->length) : 1;
    if (holds < 0) return -holds;
    return holds == 0 ? bounded_one_shot(call, ids, result) : bounded_stream(call, want_ids, ids, result);
}

/* The stream form on a lazy call's str (see str_utf8), without the GIL: STATUS_SURROGATE
 * when it met a lone surrogate (*ids freed). */
static int32_t bounded_lazy(const bounded_arguments *call, int want_ids, uint32_t **ids, bounded_result *result)
{
    if (want_ids) {
        *ids = PyMem_RawMalloc(((size_t)call->cap + 1) * sizeof(uint32_t)); /* (cap < the text's bytes) */
        if (*ids == NULL) return TKI_ERR_NOMEM;
    }
    str_utf8 text;
    str_utf8_begin(&text, call->text);
    tki_text_source source = {str_utf8_more, &text};
    tki_stream *stream = NULL;
    int32_t status = new_stream(call->vocab, call->pattern, call->compiled, call->allowed, call->refused, 0, &stream);
    if (status == TKI_OK) {
        status = tki_stream_bounded_source(stream, &source, call->cap, *ids, &result->count, &result->consumed,
                                           &result->exceeded);
        tki_stream_get_error(stream, &result->error);
    }
    tki_stream_free(stream);
    PyMem_RawFree(text.bytes);
    if (text.surrogate) {
        PyMem_RawFree(*ids);
        *ids = NULL;
        return STATUS_SURROGATE;
    }
    return status;
}

/* A bounded call (count, or encode with a cap) in whichever form is cheaper;
 * the GIL is released for long texts.  result->ids: the ids if want_ids and the
 * cap was not passed (for the caller to free), else NULL.  STATUS_PYTHON_ERROR
 * with an exception set when a lazy call's text had to be made whole and that failed. */
static int32_t bounded_call(bounded_arguments *call, int want_ids, bounded_result *result)
{
    memset(result, 0, sizeof(*result));
    if (call->lazy) {
        uint32_t *ids = NULL;
        int32_t status;
        Py_BEGIN_ALLOW_THREADS
        status = bounded_lazy(call, want_ids, &ids, result);
        Py_END_ALLOW_THREADS
        if (status != STATUS_SURROGATE) {
            if (status == TKI_OK && want_ids && !result->exceeded) {
                result->ids = ids;
            } else {
                PyMem_RawFree(ids);
            }
            return status;
        }
        if (whole_text(call) != 0) return STATUS_PYTHON_ERROR;
        memset(result, 0, sizeof(*result));
    }
    int one_shot = call->length <= ONE_SHOT_BOUNDED_BYTES &&
                   ((uint64_t)call->length <= call->cap || call->length <= ONE_SHOT_SHORT_BYTES);
    uint32_t *ids = NULL;
    int32_t status;
    if (call->length < GIL_FREE_MIN_BYTES) {
        status = bounded_form(call, one_shot, want_ids, &ids, result);
    } else {
        Py_BEGIN_ALLOW_THREADS
        status = bounded_form(call, one_shot, want_ids, &ids, result);
        Py_END_ALLOW_THREADS
    }
    if (status == TKI_OK && want_ids && !result->exceeded) {
        result->ids = ids;
    } else {
        PyMem_RawFree(ids);
    }
    return status;
}

/*
 * bounded(vocab_address, pattern, compiled_address, allowed_address, refused_address, text, cap,
 *         want_ids)
 * -> (ids | None, count, exceeded, bytes_read), or the index of a refused string found in
 * the text.  cap: None for no limit.  ids: the text's ids if want_ids and the cap was not
 * passed, else None (a caller stopped by the cap does not need them: it raises).
 */
static PyObject *module_bounded(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "bounded(vocab_address, pattern, compiled_address, allowed_address, "
                                         "refused_address, text, cap, want_ids)");
        return NULL;
    }
    bounded_arguments call;
    if (read_bounded_arguments(args, &call) != 0) return NULL;
    int want_ids = PyObject_IsTrue(args[7]);
    if (want_ids < 0) {
        Py_XDECREF(call.holder);
        return NULL;
    }
    bounded_result got;
    int32_t status = bounded_call(&call, want_ids, &got);
    PyObject *result = NULL;
    if (status != TKI_OK) {
        result = bounded_failure(status, &got.error);
    } else {
        /* the ids only when the cap was not passed: a caller stopped by the cap raises */
        PyObject *list = got.ids != NULL ? list_of_ids(got.ids, (size_t)got.count) : (Py_INCREF(Py_None), Py_None);
        if (list != NULL) {
            result = Py_BuildValue("(NKOn)", list, (unsigned long long)got.count,
                                   got.exceeded ? Py_True : Py_False, (Py_ssize_t)got.consumed);
        }
    }
    PyMem_RawFree(got.ids);
    Py_XDECREF(call.holder);
    return result;
}

/*
 * count(text, limit=None) -> int | None, bound to a vocabulary, a built-in
 * pattern and the special tokens to refuse (count_tokens' default arguments:
 * none allowed, all others refused): the number of ids of encode(text), or
 * limit + 1 once more than limit are certain, in one C call.  None for what
 * the caller's full path must answer: a text that is no str, has lone
 * surrogates or holds a refused string's text, or a limit that is no int >= 0.
 */
static PyObject *counter_count(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "count(text, limit=None)");
        return NULL;
    }
    bounded_arguments call = {bound->vocab, bound->pattern, bound->compiled, NULL, bound->refused, NULL, 0, NULL, 0,
                              UINT64_MAX, NULL, 0};
    if (nargs == 2 && args[1] != Py_None) {
        if (!PyLong_CheckExact(args[1])) Py_RETURN_NONE;
        call.cap = PyLong_AsUnsignedLongLong(args[1]);
        if (call.cap == (unsigned long long)-1 && PyErr_Occurred()) { /* negative, or too large */
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    if (!PyUnicode_Check(args[0])) Py_RETURN_NONE;
    call.text = args[0];
    call.lazy = reads_lazily(args[0], call.cap);
    if (!call.lazy) {
        int kept = kept_utf8(args[0], &call.data, &call.length);
        if (kept <= 0) {
            if (kept < 0) return NULL;
            Py_RETURN_NONE;
        }
    }
    bounded_result got;
    int32_t status = bounded_call(&call, 0, &got);
    Py_XDECREF(call.holder); /* (a lazy call that met a lone surrogate made the text whole) */
    if (status == STATUS_PYTHON_ERROR) return NULL;
    if (status == TKI_ERR_REFUSED_SPECIAL) Py_RETURN_NONE;
    if (status != TKI_OK) return raise_status(status);
    return PyLong_FromUnsignedLongLong(got.count);
}

static PyMethodDef counter_method[] = {
    {"count", (PyCFunction)(void (*)(void))counter_count, METH_FASTCALL,
     "count_tokens(text, limit) with the default special-token arguments, else None"},
};

/* counter(vocab_address, pattern, refused_address, owner[, compiled_address]) ->
 * count(text, limit=None), bound to the tki_vocab at vocab_address, a TKI_PATTERN_*
 * (or 0: a stretch is one piece, or the tki_pattern at compiled_address splits), and
 * the tki_special_matcher at refused_address (0: none), all kept alive by `owner`. */
static PyObject *module_counter(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 && nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "counter(vocab_address, pattern, refused_address, owner[, compiled_address])");
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    const tki_pattern *compiled = NULL;
    if (vocab_and_pattern(args, nargs, 4, "counter", 0, &vocab, &pattern, &compiled) != 0) return NULL;
    void *refused = PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred()) return NULL;
    return bound_function(vocab, pattern, compiled, refused, NULL, args[3], NULL, counter_method);
}

/* The characters in data[0..len) (UTF-8): its bytes less its continuation bytes, eight at a time. */
static size_t utf8_characters(const uint8_t *data, size_t len)
{
    /* Sixteen bytes a step: each byte lane of `lanes` counts the continuation bytes at its
     * place (a comparison's true lane is -1) in up to 255 steps; then the lanes are summed.
     * (GCC's vectors: SSE2 or NEON where there is one, plain words elsewhere.) */
    typedef uint8_t bytes16 __attribute__((vector_size(16)));
    size_t continuations = 0, i = 0;
    while (len - i >= 16) {
        bytes16 lanes = {0};
        for (size_t steps = 0; steps < 255 && len - i >= 16; steps++, i += 16) {
            bytes16 chunk;
            memcpy(&chunk, data + i, 16);
            lanes -= (bytes16)((chunk & 0xC0) == 0x80);
        }
        uint8_t counts[16];
        memcpy(counts, &lanes, 16);
        for (size_t lane = 0; lane < 16; lane++) continuations += counts[lane];
    }
    for (; i < len; i++) continuations += (data[i] & 0xC0) == 0x80;
    return len - continuations;
}

/*
 * The stream form of truncate, without the GIL: the text's UTF-8 from call->data, or for a
 * lazy call from a str_utf8 (STATUS_SURROGATE when it met a lone surrogate); *characters:
 * the prefix's characters (-1 when the text had lone surrogates and was replaced).
 */
static int32_t truncate_stream(const bounded_arguments *call, int is_ascii, uint32_t *ids, uint64_t *count,
                               size_t *prefix, Py_ssize_t *characters, tki_stream_error *error)
{
    str_utf8 text;
    memset(&text, 0, sizeof(text));
    if (call->lazy) str_utf8_begin(&text, call->text);
    tki_text_source source = {str_utf8_more, &text};
    tki_stream *stream = NULL;
    int32_t status = new_stream(call->vocab, call->pattern, call->compiled, call->allowed, call->refused, 0, &stream);
    if (status == TKI_OK) {
        status = call->lazy ? tki_stream_truncate_source(stream, &source, call->cap, ids, count, prefix)
                            : tki_stream_truncate(stream, (const uint8_t *)call->data, (size_t)call->length,
                                                  call->cap, ids, count, prefix);
        tki_stream_get_error(stream, error);
    }
    tki_stream_free(stream);
    if (text.surrogate) {
        status = STATUS_SURROGATE;
    } else if (status == TKI_OK) {
        const uint8_t *data = call->lazy ? text.bytes : (const uint8_t *)call->data; /* (the prefix is in it) */
        *characters = call->had_surrogates ? -1
                      : is_ascii           ? (Py_ssize_t)*prefix /* a character per byte */
                                           : (Py_ssize_t)utf8_characters(data, *prefix);
    }
    PyMem_RawFree(text.bytes);
    return status;
}

/*
 * truncate(vocab_address, pattern, compiled_address, allowed_address, refused_address, text,
 *          max_tokens)
 * -> (ids, prefix_bytes, prefix_characters), or the index of a refused string: the
 * prefix is the first prefix_bytes of the text's UTF-8; prefix_characters is -1 when the
 * text had lone surrogates (the caller maps the bytes back to the str).  A text of at
 * most max_tokens bytes is its own answer: one bounded_call, one-shot below its bound.
 */
static PyObject *module_truncate(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "truncate(vocab_address, pattern, compiled_address, allowed_address, "
                                         "refused_address, text, max_tokens)");
        return NULL;
    }
    bounded_arguments call;
    if (read_bounded_arguments(args, &call) != 0) return NULL;
    if (!call.lazy && (uint64_t)call.length <= call.cap) { /* the whole text fits (an id covers a byte at least) */
        bounded_result got;
        int32_t status = bounded_call(&call, 1, &got);
        PyObject *result = NULL;
        if (status != TKI_OK) {
            result = bounded_failure(status, &got.error);
        } else {
            PyObject *list = list_of_ids(got.ids, (size_t)got.count);
            Py_ssize_t characters = call.had_surrogates ? -1 : PyUnicode_GET_LENGTH(args[5]);
            if (list != NULL) result = Py_BuildValue("(Nnn)", list, call.length, characters);
        }
        PyMem_RawFree(got.ids);
        Py_XDECREF(call.holder);
        return result;
    }
    /* (a lazy call's cap is less than the text's bytes, which it cannot know ahead) */
    size_t capacity = call.lazy || call.cap < (uint64_t)call.length ? (size_t)call.cap + 1 : (size_t)call.length + 1;
    uint32_t *ids = PyMem_RawMalloc(capacity * sizeof(uint32_t));
    if (ids == NULL) {
        Py_XDECREF(call.holder);
        return PyErr_NoMemory();
    }
    int is_ascii = PyUnicode_Check(args[5]) && PyUnicode_IS_ASCII(args[5]);
    uint64_t count = 0;
    size_t prefix = 0;
    Py_ssize_t characters = -1;
    int32_t status;
    tki_stream_error error = {0};
    Py_BEGIN_ALLOW_THREADS
    status = truncate_stream(&call, is_ascii, ids, &count, &prefix, &characters, &error);
    Py_END_ALLOW_THREADS
    if (status == STATUS_SURROGATE) { /* the whole text, its lone surrogates replaced */
        status = whole_text(&call) != 0 ? STATUS_PYTHON_ERROR : TKI_OK;
        if (status == TKI_OK) {
            Py_BEGIN_ALLOW_THREADS
            status = truncate_stream(&call, is_ascii, ids, &count, &prefix, &characters, &error);
            Py_END_ALLOW_THREADS
        }
    }
    PyObject *result = NULL;
    if (status != TKI_OK) {
        result = bounded_failure(status, &error);
    } else {
        PyObject *list = list_of_ids(ids, (size_t)count);
        if (list != NULL) result = Py_BuildValue("(Nnn)", list, (Py_ssize_t)prefix, characters);
    }
    PyMem_RawFree(ids);
    Py_XDECREF(call.holder);
    return result;
}
