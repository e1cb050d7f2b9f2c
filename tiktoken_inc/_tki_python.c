/*
 * _tki_python.c: the few functions of tiktoken_inc._tki that take and return
 * Python objects, so that the commonest calls cost one C call from Python.
 *
 * Everything else in _tki is the C core (csrc/) seen through cffi, which
 * speaks only C types: an encode through cffi pays for encoding the str to
 * bytes, for the call, and then for a Python int per id (ffi.unpack).  On
 * documents of a few hundred bytes those costs were as large as the encoding
 * itself.  Here:
 *   - the text's UTF-8 is read where CPython keeps it (no copy for ASCII);
 *   - the GIL is released only for texts long enough to pay for it;
 *   - id lists are filled from a table of Python ints made once per id.
 *
 * tki_python_install adds the functions to the module tiktoken_inc._tki
 * (cffi calls it once, without the GIL; it takes the GIL itself).
 *
 * The int table is the one mutable global here: slot i holds the int i once
 * some list has needed it, and is never freed (at most ID_TABLE_SIZE ints,
 * about 8 MiB).  It is read and written only with the GIL held; a build
 * without a GIL makes a new int per id instead.
 */
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "tiktoken_inc.h"

#define ID_TABLE_SIZE ((size_t)1 << 18)      /* ids below this share one int object  */
#define STACK_IDS 1024                       /* outputs this small live on the stack */
#define GIL_FREE_MIN_BYTES ((Py_ssize_t)2048) /* shorter texts keep the GIL          */
#define BINDING_CAPSULE "tiktoken_inc._tki.binding"

#ifndef Py_GIL_DISABLED
static PyObject *id_table[ID_TABLE_SIZE];
#endif

static PyObject *id_object(uint32_t id)
{
#ifndef Py_GIL_DISABLED
    if (id < ID_TABLE_SIZE) {
        PyObject *value = id_table[id];
        if (value == NULL) {
            value = PyLong_FromUnsignedLong(id);
            if (value == NULL) return NULL;
            id_table[id] = value;
        }
        Py_INCREF(value);
        return value;
    }
#endif
    return PyLong_FromUnsignedLong(id);
}

/*
 * Large blocks about to be written for the first time (an id buffer, a list's
 * items) get tki_advise_huge_pages.  A block this large comes fresh from mmap,
 * and faulting it in 4 KiB at a time cost more than filling it: a 16 MiB run
 * of digits makes 5.6 million ids, 67 MB of buffer and list, ~16,000 page
 * faults.
 */
#define HUGE_ADVICE_MIN_BYTES ((size_t)8 << 20)

static void advise_huge_pages(void *memory, size_t size)
{
    if (size >= HUGE_ADVICE_MIN_BYTES) tki_advise_huge_pages(memory, size);
}

/* A new list of ids[0..count).  The table slots and int objects of ids
 * further on are loaded early (a table of 2^18 pointers and the ints it
 * holds do not stay in the nearer caches), so their misses overlap. */
static PyObject *list_of_ids(const uint32_t *ids, size_t count)
{
    enum { SLOTS_AHEAD = 64, OBJECTS_AHEAD = 16 };
#if !defined(Py_GIL_DISABLED) && (defined(__GNUC__) || defined(__clang__))
    /* The first ids' slots and ints, which the loop's look-ahead does not reach
     * (the slots first: they load while the list is allocated). */
    for (size_t i = 0; i < count && i < SLOTS_AHEAD; i++) {
        if (ids[i] < ID_TABLE_SIZE) __builtin_prefetch(&id_table[ids[i]]);
    }
#endif
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL) return NULL;
    advise_huge_pages(((PyListObject *)list)->ob_item, count * sizeof(PyObject *));
#if !defined(Py_GIL_DISABLED) && (defined(__GNUC__) || defined(__clang__))
    for (size_t i = 0; i < count && i < OBJECTS_AHEAD; i++) {
        if (ids[i] < ID_TABLE_SIZE && id_table[ids[i]] != NULL) __builtin_prefetch(id_table[ids[i]], 1);
    }
#endif
    for (size_t i = 0; i < count; i++) {
#if !defined(Py_GIL_DISABLED) && (defined(__GNUC__) || defined(__clang__))
        if (i + SLOTS_AHEAD < count && ids[i + SLOTS_AHEAD] < ID_TABLE_SIZE) {
            __builtin_prefetch(&id_table[ids[i + SLOTS_AHEAD]]);
        }
        if (i + OBJECTS_AHEAD < count && ids[i + OBJECTS_AHEAD] < ID_TABLE_SIZE &&
            id_table[ids[i + OBJECTS_AHEAD]] != NULL) {
            __builtin_prefetch(id_table[ids[i + OBJECTS_AHEAD]], 1);
        }
#endif
        PyObject *value = id_object(ids[i]);
        if (value == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

static PyObject *raise_status(int32_t status)
{
    PyErr_Format(status == TKI_ERR_NOMEM ? PyExc_MemoryError : PyExc_ValueError, "encoding failed: %s",
                 tki_status_message(status));
    return NULL;
}

/* The UTF-8 of a str (CPython's own copy), or a bytes object's contents. */
static const char *utf8_of(PyObject *text, Py_ssize_t *length)
{
    if (PyUnicode_Check(text)) return PyUnicode_AsUTF8AndSize(text, length);
    if (PyBytes_Check(text)) {
        *length = PyBytes_GET_SIZE(text);
        return PyBytes_AS_STRING(text);
    }
    PyErr_Format(PyExc_TypeError, "expected str or bytes, got %.100s", Py_TYPE(text)->tp_name);
    return NULL;
}

/* What the encoders and decoders are bound to (held in a capsule that is
 * their `self`): a vocabulary, a pattern (encoders), the special tokens whose
 * text the *_unless_special encoders refuse (or NULL), the Python object
 * that keeps them alive, and (encode_ordinary) the function that takes what
 * the C path does not (or NULL). */
typedef struct binding {
    const tki_vocab *vocab;
    int32_t pattern;
    const tki_special_matcher *refused;
    PyObject *owner;
    PyObject *fallback;
} binding;

static void binding_free(PyObject *capsule)
{
    binding *bound = PyCapsule_GetPointer(capsule, BINDING_CAPSULE);
    if (bound == NULL) return;
    Py_XDECREF(bound->owner);
    Py_XDECREF(bound->fallback);
    PyMem_Free(bound);
}

static const binding *binding_of(PyObject *capsule)
{
    return PyCapsule_GetPointer(capsule, BINDING_CAPSULE);
}

/* A tuple of the `count` functions of `methods`, all bound to one new binding
 * (which keeps `owner` and `fallback`, if not NULL, alive); NULL with an
 * exception set. */
static PyObject *bound_functions(const tki_vocab *vocab, int32_t pattern, const tki_special_matcher *refused,
                                 PyObject *owner, PyObject *fallback, PyMethodDef *methods, Py_ssize_t count)
{
    binding *bound = PyMem_Malloc(sizeof *bound);
    if (bound == NULL) return PyErr_NoMemory();
    bound->vocab = vocab;
    bound->pattern = pattern;
    bound->refused = refused;
    Py_INCREF(owner);
    bound->owner = owner;
    Py_XINCREF(fallback);
    bound->fallback = fallback;
    PyObject *capsule = PyCapsule_New(bound, BINDING_CAPSULE, binding_free);
    if (capsule == NULL) {
        Py_DECREF(owner);
        PyMem_Free(bound);
        return NULL;
    }
    PyObject *functions = PyTuple_New(count);
    for (Py_ssize_t i = 0; functions != NULL && i < count; i++) {
        PyObject *function = PyCFunction_New(&methods[i], capsule);
        if (function == NULL) {
            Py_CLEAR(functions);
            break;
        }
        PyTuple_SET_ITEM(functions, i, function);
    }
    Py_DECREF(capsule);
    return functions;
}

/* Whether data[0..length) holds the text of a refused special token: 1 or 0,
 * or -1 with an exception set. */
static int holds_refused(const binding *bound, const char *data, Py_ssize_t length)
{
    if (bound->refused == NULL) return 0;
    size_t start = 0, found = 0;
    uint32_t string = 0;
    int32_t status = tki_special_matcher_find(bound->refused, (const uint8_t *)data, (size_t)length, 0, &start,
                                              &string, 1, &found);
    if (status != TKI_OK) {
        raise_status(status);
        return -1;
    }
    return found > 0;
}

/* The ids of data[0..length) as a new list. */
static PyObject *encode_utf8(const binding *bound, const char *data, Py_ssize_t length)
{
    uint32_t stack_ids[STACK_IDS];
    uint32_t *ids = stack_ids;
    if ((size_t)length > STACK_IDS) {
        if ((size_t)length > SIZE_MAX / sizeof(uint32_t)) return PyErr_NoMemory();
        ids = PyMem_RawMalloc((size_t)length * sizeof(uint32_t));
        if (ids == NULL) return PyErr_NoMemory();
        advise_huge_pages(ids, (size_t)length * sizeof(uint32_t));
    }
    tki_encode_job job = {bound->vocab, bound->pattern, 0, ids, (size_t)length > STACK_IDS ? (size_t)length : STACK_IDS, 0};
    int64_t count;
    if (length >= GIL_FREE_MIN_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        count = tki_encode_job_run(&job, (const uint8_t *)data, (size_t)length);
        Py_END_ALLOW_THREADS
    } else {
        count = tki_encode_job_run(&job, (const uint8_t *)data, (size_t)length);
    }
    PyObject *result = count < 0 ? raise_status((int32_t)-count) : list_of_ids(ids, (size_t)count);
    if (ids != stack_ids) PyMem_RawFree(ids);
    return result;
}

/* encode(text) -> list[int]: encode_ordinary of a str (or of UTF-8 bytes). */
static PyObject *encoder_encode(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    Py_ssize_t length = 0;
    const char *data = utf8_of(text, &length);
    if (data == NULL) return NULL;
    return encode_utf8(bound, data, length);
}

/* encode_ordinary(text) -> list[int]: the ids of a str; anything else (not a
 * str, or a str with lone surrogates) goes to the binding's fallback, which
 * says what tiktoken would.  Bound as Encoding.encode_ordinary itself, so that
 * the commonest call is one C call with no Python frame. */
static PyObject *encoder_encode_ordinary(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (PyUnicode_Check(text)) {
        Py_ssize_t length = 0;
        const char *data = PyUnicode_AsUTF8AndSize(text, &length);
        if (data != NULL) return encode_utf8(bound, data, length);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
        PyErr_Clear();
    }
    if (bound->fallback == NULL) {
        PyErr_Format(PyExc_TypeError, "expected a str without lone surrogates, got %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    return PyObject_CallOneArg(bound->fallback, text);
}

static PyMethodDef ordinary_encoder_method[] = {
    {"encode_ordinary", encoder_encode_ordinary, METH_O,
     "Encodes a string into tokens, ignoring special tokens (Encoding.encode_ordinary)."},
};

/* encode_unless_special(text) -> list[int] | None: encode_ordinary of a str
 * that holds none of the refused special tokens' text; None if it holds one,
 * or has lone surrogates (the caller's full path then says what to do). */
static PyObject *encoder_encode_unless_special(PyObject *capsule, PyObject *text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    if (!PyUnicode_Check(text)) Py_RETURN_NONE;
    Py_ssize_t length = 0;
    const char *data = PyUnicode_AsUTF8AndSize(text, &length);
    if (data == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int refused = holds_refused(bound, data, length);
    if (refused != 0) {
        if (refused < 0) return NULL;
        Py_RETURN_NONE;
    }
    return encode_utf8(bound, data, length);
}

/*
 * The ids of each str of a list or tuple, all in one run of the C core
 * without the GIL.  refusing == 0 (encode_many): TypeError for an item that is
 * not a str, UnicodeEncodeError for one with lone surrogates (the caller then
 * goes item by item, which says what is wrong).  refusing == 1
 * (encode_many_unless_special): such an item, and one that holds a refused
 * special token's text, gets None instead of its ids.
 */
static PyObject *encode_many(const binding *bound, PyObject *texts, int refusing)
{
    PyObject *sequence = PySequence_Fast(texts, "encode_many takes a list of str");
    if (sequence == NULL) return NULL;
    Py_ssize_t text_count = PySequence_Fast_GET_SIZE(sequence);
    PyObject **items = PySequence_Fast_ITEMS(sequence);
    PyObject *result = NULL;
    size_t *text_ends = NULL;
    uint64_t *token_ends = NULL;
    uint8_t *data = NULL;
    uint32_t *ids = NULL;
    uint8_t *refused = NULL; /* refusing: 1 for an item that gets None */

    text_ends = PyMem_RawMalloc(((size_t)text_count + 1) * sizeof(size_t));
    token_ends = PyMem_RawMalloc(((size_t)text_count + 1) * sizeof(uint64_t));
    refused = PyMem_RawCalloc((size_t)text_count + 1, 1);
    if (text_ends == NULL || token_ends == NULL || refused == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < text_count; i++) {
        Py_ssize_t length = 0;
        const char *utf8 = NULL;
        if (!PyUnicode_Check(items[i])) {
            if (!refusing) {
                PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(items[i])->tp_name);
                goto done;
            }
        } else if ((utf8 = PyUnicode_AsUTF8AndSize(items[i], &length)) == NULL) {
            if (!refusing || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) goto done;
            PyErr_Clear();
        } else if (refusing) {
            int holds = holds_refused(bound, utf8, length);
            if (holds < 0) goto done;
            if (holds) utf8 = NULL;
        }
        if (utf8 == NULL) {
            refused[i] = 1;
            length = 0;
        }
        total += (size_t)length;
        text_ends[i] = total;
    }
    if (total > SIZE_MAX / sizeof(uint32_t) - 1) {
        PyErr_NoMemory();
        goto done;
    }
    data = PyMem_RawMalloc(total + 1);
    ids = PyMem_RawMalloc((total + 1) * sizeof(uint32_t));
    if (data == NULL || ids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    advise_huge_pages(data, total + 1);
    advise_huge_pages(ids, (total + 1) * sizeof(uint32_t));
    for (Py_ssize_t i = 0, start = 0; i < text_count; i++) {
        if (refused[i]) continue;
        Py_ssize_t length = 0;
        const char *utf8 = PyUnicode_AsUTF8AndSize(items[i], &length); /* cached above */
        memcpy(data + start, utf8, (size_t)length);
        start += length;
    }
    tki_encode_job job = {bound->vocab, bound->pattern, 0, ids, total + 1, 0};
    int64_t id_count;
    Py_BEGIN_ALLOW_THREADS
    id_count = tki_encode_job_run_many(&job, data, text_ends, (size_t)text_count, token_ends);
    Py_END_ALLOW_THREADS
    if (id_count < 0) {
        raise_status((int32_t)-id_count);
        goto done;
    }
    result = PyList_New(text_count);
    if (result == NULL) goto done;
    for (Py_ssize_t i = 0; i < text_count; i++) {
        uint64_t start = i == 0 ? 0 : token_ends[i - 1];
        PyObject *list = NULL;
        if (refused[i]) {
            Py_INCREF(Py_None);
            list = Py_None;
        } else {
            list = list_of_ids(ids + start, (size_t)(token_ends[i] - start));
        }
        if (list == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, list);
    }
done:
    PyMem_RawFree(refused);
    PyMem_RawFree(ids);
    PyMem_RawFree(data);
    PyMem_RawFree(token_ends);
    PyMem_RawFree(text_ends);
    Py_DECREF(sequence);
    return result;
}

static PyObject *encoder_encode_many(PyObject *capsule, PyObject *texts)
{
    const binding *bound = binding_of(capsule);
    return bound == NULL ? NULL : encode_many(bound, texts, 0);
}

/* encode_many_unless_special(texts) -> list[list[int] | None]: the default
 * encode of each str; None for an item it does not take (see encode_many). */
static PyObject *encoder_encode_many_unless_special(PyObject *capsule, PyObject *texts)
{
    const binding *bound = binding_of(capsule);
    return bound == NULL ? NULL : encode_many(bound, texts, 1);
}

static PyMethodDef encoder_methods[] = {
    {"encode", encoder_encode, METH_O, "encode_ordinary of one str: a list of ids"},
    {"encode_many", encoder_encode_many, METH_O, "encode_ordinary of each str of a list"},
    {"encode_unless_special", encoder_encode_unless_special, METH_O,
     "encode_ordinary of a str without refused special-token text, else None"},
    {"encode_many_unless_special", encoder_encode_many_unless_special, METH_O,
     "encode_unless_special of each str of a list, in one run without the GIL"},
};

/* The tki_vocab at address args[0] and the built-in TKI_PATTERN_* args[1] of
 * the module function `name`: 0, or -1 with an exception set. */
static int vocab_and_pattern(PyObject *const *args, const char *name, void **vocab, int32_t *pattern)
{
    *vocab = PyLong_AsVoidPtr(args[0]);
    long value = PyLong_AsLong(args[1]);
    if (PyErr_Occurred()) return -1;
    if (*vocab == NULL || value < TKI_PATTERN_R50K || value > TKI_PATTERN_O200K) {
        PyErr_Format(PyExc_ValueError, "%s: no vocabulary, or not a built-in pattern", name);
        return -1;
    }
    *pattern = (int32_t)value;
    return 0;
}

/* encoders(vocab_address, pattern, refused_address, owner) -> (encode,
 * encode_many, encode_unless_special, encode_many_unless_special), bound to the
 * tki_vocab at vocab_address,
 * a TKI_PATTERN_* and the tki_special_matcher at refused_address (0: none),
 * all kept alive by `owner`. */
static PyObject *module_encoders(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encoders(vocab_address, pattern, refused_address, owner)");
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    if (vocab_and_pattern(args, "encoders", &vocab, &pattern) != 0) return NULL;
    void *refused = PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred()) return NULL;
    return bound_functions(vocab, pattern, refused, args[3], NULL, encoder_methods, 4);
}

/* ordinary_encoder(vocab_address, pattern, owner, fallback) -> encode_ordinary,
 * bound to the tki_vocab at vocab_address and a TKI_PATTERN_*, kept alive by
 * `owner`; `fallback(text)` takes what it does not (encoder_encode_ordinary). */
static PyObject *module_ordinary_encoder(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "ordinary_encoder(vocab_address, pattern, owner, fallback)");
        return NULL;
    }
    void *vocab = NULL;
    int32_t pattern = 0;
    if (vocab_and_pattern(args, "ordinary_encoder", &vocab, &pattern) != 0) return NULL;
    if (!PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "ordinary_encoder: the fallback is not callable");
        return NULL;
    }
    PyObject *functions = bound_functions(vocab, pattern, NULL, args[2], args[3], ordinary_encoder_method, 1);
    if (functions == NULL) return NULL;
    PyObject *function = PyTuple_GET_ITEM(functions, 0);
    Py_INCREF(function);
    Py_DECREF(functions);
    return function;
}

/* id_list(address, count) -> list[int]: the uint32 ids at address. */
static PyObject *module_id_list(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "id_list(address, count)");
        return NULL;
    }
    const uint32_t *ids = PyLong_AsVoidPtr(args[0]);
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred()) return NULL;
    if (count < 0 || (ids == NULL && count > 0)) {
        PyErr_SetString(PyExc_ValueError, "id_list: no ids at this address");
        return NULL;
    }
    return list_of_ids(ids, (size_t)count);
}

/*
 * Decoding.  A decoder is bound to a vocabulary (a capsule holding it, with the
 * Python object that keeps it alive).  It takes a list or tuple of ints and
 * returns None, not an error, for anything it does not take as it is (an item
 * that is not an int, out of range, or no token): the caller's general path
 * then gives tiktoken's exact error or conversion.
 */
#define STACK_BYTES 4096

/* The bytes of tokens (a list or tuple of ints) go to a buffer: `stack` when
 * they fit, else a new one (*out_heap, to free).  1: done; 0: not taken as it
 * is (see above); -1: an exception is set. */
static int decode_to_buffer(const binding *bound, PyObject *tokens, uint8_t *stack,
                            size_t stack_size, uint8_t **out_bytes, size_t *out_len, uint8_t **out_heap)
{
    *out_heap = NULL;
    if (!PyList_CheckExact(tokens) && !PyTuple_CheckExact(tokens)) return 0;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(tokens);
    PyObject **items = PySequence_Fast_ITEMS(tokens);
    uint32_t stack_ids[STACK_IDS];
    uint32_t *ids = stack_ids;
    int result = 0;
    if ((size_t)count > STACK_IDS) {
        ids = PyMem_RawMalloc((size_t)count * sizeof(uint32_t));
        if (ids == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyLong_CheckExact(items[i])) goto done;
        unsigned long value = PyLong_AsUnsignedLong(items[i]);
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto done;
        }
        if (value > UINT32_MAX) goto done;
        ids[i] = (uint32_t)value;
    }
    size_t length = 0, bad = 0;
    if (tki_decoded_length(bound->vocab, ids, (size_t)count, &length, &bad) != TKI_OK) goto done;
    uint8_t *bytes = stack;
    if (length > stack_size) {
        bytes = *out_heap = PyMem_RawMalloc(length);
        if (bytes == NULL) {
            PyErr_NoMemory();
            result = -1;
            goto done;
        }
    }
    if (tki_decode(bound->vocab, ids, (size_t)count, bytes, length, &length, &bad) != TKI_OK) {
        PyMem_RawFree(*out_heap);
        *out_heap = NULL;
        goto done;
    }
    *out_bytes = bytes;
    *out_len = length;
    result = 1;
done:
    if (ids != stack_ids) PyMem_RawFree(ids);
    return result;
}

/* The bytes of tokens as bytes, or (as_text) as str decoded from UTF-8 with
 * errors replaced; None for what decode_to_buffer does not take. */
static PyObject *decode_as(PyObject *capsule, PyObject *tokens, int as_text)
{
    const binding *bound = binding_of(capsule);
    if (bound == NULL) return NULL;
    uint8_t stack[STACK_BYTES];
    uint8_t *bytes = NULL, *heap = NULL;
    size_t length = 0;
    int taken = decode_to_buffer(bound, tokens, stack, sizeof stack, &bytes, &length, &heap);
    if (taken <= 0) {
        if (taken < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = as_text ? PyUnicode_DecodeUTF8((const char *)bytes, (Py_ssize_t)length, "replace")
                               : PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)length);
    PyMem_RawFree(heap);
    return result;
}

/* decode_bytes(tokens) -> bytes | None */
static PyObject *decoder_decode_bytes(PyObject *capsule, PyObject *tokens)
{
    return decode_as(capsule, tokens, 0);
}

/* decode(tokens) -> str | None: the bytes decoded as UTF-8, errors replaced. */
static PyObject *decoder_decode(PyObject *capsule, PyObject *tokens)
{
    return decode_as(capsule, tokens, 1);
}

static PyMethodDef decoder_methods[] = {
    {"decode_bytes", decoder_decode_bytes, METH_O, "the bytes of a list of ids, or None"},
    {"decode", decoder_decode, METH_O, "the bytes of a list of ids as str (errors replaced), or None"},
};

/* decoders(vocab_address, owner) -> (decode_bytes, decode) for the tki_vocab
 * at vocab_address, kept alive by `owner`. */
static PyObject *module_decoders(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decoders(vocab_address, owner)");
        return NULL;
    }
    void *vocab = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred()) return NULL;
    if (vocab == NULL) {
        PyErr_SetString(PyExc_ValueError, "decoders: no vocabulary");
        return NULL;
    }
    return bound_functions(vocab, 0, NULL, args[1], NULL, decoder_methods, 2);
}

/*
 * chunk_ends(texts, threads) -> the end indices of consecutive chunks of a
 * list or tuple of str, for a batch on `threads` threads, or None if `texts`
 * is not a list or tuple of str.  The chunks carry about the same work (a
 * str weighs its length times its width, 1, 2 or 4 bytes per character): about
 * a quarter of a thread's share each, between 4 Ki and 256 Ki.  Equal counts
 * of texts made chunks of unequal work, and a thread sat idle at the end; a
 * loop here costs ~2 ns per text where the same in Python cost ~100.
 */
/* A ready str's weight for chunk_ends: its length times its width. */
static uint64_t text_weight(PyObject *text)
{
    return (uint64_t)PyUnicode_GET_LENGTH(text) * (uint64_t)PyUnicode_KIND(text);
}

static PyObject *module_chunk_ends(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "chunk_ends(texts, threads)");
        return NULL;
    }
    PyObject *texts = args[0];
    Py_ssize_t threads = PyLong_AsSsize_t(args[1]);
    if (threads == -1 && PyErr_Occurred()) return NULL;
    if (!PyList_CheckExact(texts) && !PyTuple_CheckExact(texts)) Py_RETURN_NONE;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(texts);
    PyObject **items = PySequence_Fast_ITEMS(texts);
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyUnicode_Check(items[i])) Py_RETURN_NONE;
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(items[i]) < 0) return NULL;
#endif
        total += text_weight(items[i]);
    }
    uint64_t shares = 4 * (uint64_t)(threads < 1 ? 1 : threads > (1 << 20) ? (1 << 20) : threads);
    uint64_t target = total / shares;
    if (target < ((uint64_t)1 << 12)) target = (uint64_t)1 << 12;
    if (target > ((uint64_t)1 << 18)) target = (uint64_t)1 << 18;
    /* The ends first, in C: making Python objects can run the garbage
     * collector, and with it code that could change `texts`. */
    Py_ssize_t *ends = PyMem_Malloc(((size_t)count + 1) * sizeof(Py_ssize_t));
    if (ends == NULL) return PyErr_NoMemory();
    Py_ssize_t chunks = 0;
    uint64_t weight = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        weight += text_weight(items[i]);
        if (weight >= target || i == count - 1) {
            ends[chunks++] = i + 1;
            weight = 0;
        }
    }
    PyObject *result = PyList_New(chunks);
    for (Py_ssize_t k = 0; result != NULL && k < chunks; k++) {
        PyObject *end = PyLong_FromSsize_t(ends[k]);
        if (end == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, k, end);
    }
    PyMem_Free(ends);
    return result;
}

static PyMethodDef module_methods[] = {
    {"decoders", (PyCFunction)(void (*)(void))module_decoders, METH_FASTCALL,
     "decoders(vocab_address, owner) -> (decode_bytes, decode)"},
    {"encoders", (PyCFunction)(void (*)(void))module_encoders, METH_FASTCALL,
     "encoders(vocab_address, pattern, refused_address, owner) -> (encode, encode_many, encode_unless_special, "
     "encode_many_unless_special)"},
    {"ordinary_encoder", (PyCFunction)(void (*)(void))module_ordinary_encoder, METH_FASTCALL,
     "ordinary_encoder(vocab_address, pattern, owner, fallback) -> encode_ordinary"},
    {"id_list", (PyCFunction)(void (*)(void))module_id_list, METH_FASTCALL,
     "id_list(address, count) -> list of the uint32 ids at address"},
    {"chunk_ends", (PyCFunction)(void (*)(void))module_chunk_ends, METH_FASTCALL,
     "chunk_ends(texts, threads) -> end indices of chunks of about equal work, or None"},
    {NULL, NULL, 0, NULL},
};

int32_t tki_python_install(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    int32_t status = -1;
    PyObject *module = PyImport_ImportModule("tiktoken_inc._tki");
    if (module != NULL) {
        status = PyObject_HasAttrString(module, "encoders") ? 0 : PyModule_AddFunctions(module, module_methods);
        Py_DECREF(module);
    }
    if (status != 0) PyErr_Clear();
    PyGILState_Release(gil);
    return status;
}
