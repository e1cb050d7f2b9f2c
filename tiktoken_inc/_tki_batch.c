/*
 * _tki_batch.c: batches of texts encoded on several threads without the GIL,
 * for tiktoken_inc/_tki_python.c (included there: it uses that file's
 * bindings, lists and errors).  One engine, two outputs:
 *
 *   - lists (encode_many, encode_many_with_specials): a list of ids per text,
 *     what encode_ordinary_batch and encode_batch return;
 *   - flat (encode_flat): all ids in one array and the int64 offsets of each
 *     document's ids, with no Python int made (encode_*_batch_to_numpy, the
 *     corpus command, Ray's Tokenize).  The GIL is released for the whole
 *     encoding.
 *
 * The documents are cut into items: runs of consecutive documents of about
 * BATCH_ITEM_BYTES together.  Up to `threads` threads take items from a shared
 * counter, the largest first (a long document is an item of its own, and taken
 * last it would end the batch on one thread while the others wait: a 233 KB
 * document did so for a quarter of a 16-thread batch), and encode them, each
 * into its own arena: blocks of ids
 * that never move once written, so that a document's ids can be read (by the
 * list builder) while their thread goes on writing further ones.  A block is
 * allocated as an item needs room (an item needs at most one id per byte,
 * plus one per document for the end-of-text id), so the arenas together hold
 * about the ids themselves, not a slot per input byte.
 *
 * Lists: the calling thread takes items too, and between them builds, with the
 * GIL, the lists of every item already done, in whatever order they finished
 * (PyList_SET_ITEM puts each at its index).  The lists, which only a thread
 * holding the GIL may build, are thus made while the other threads encode; the
 * list building is the one serial part (see docs/performance.md for its
 * share).  After each of its own items and each wait it runs the signal
 * handlers, so Ctrl-C stops a long batch there.
 *
 * Flat: the ids must end up in one array whose size is known only once every
 * document is encoded.  The threads encode into their arenas as above; then
 * the calling thread sums the counts into the offsets, allocates the result
 * (a bytearray: numpy and Arrow wrap it without a copy), and the same threads
 * copy each item's ids to their place in parallel (a copy costs ~1% of an
 * encode: the ids are a quarter of the text's bytes, copied at memory speed).
 * The calling thread encodes nothing itself in a batch worth threads: it waits
 * without the GIL and wakes every BATCH_SIGNAL_CHECK_MS to run the signal
 * handlers, so another Python thread keeps the GIL while the batch runs (a
 * thread that takes the GIL back after each item waits up to the interpreter's
 * switch interval, 5 ms, each time another thread holds it), and Ctrl-C still
 * stops the batch.
 *
 * The documents of a flat batch may be str (their UTF-8, lone surrogates
 * replaced as encode does) or, for the corpus command, bytes checked as UTF-8
 * by the threads; with `lines`, every line of a text (split at '\n', which is
 * left out) is a document of its own.
 *
 * The helper threads touch no Python object.  A str whose UTF-8 CPython has
 * not made is read as its characters (a str never changes, and a tuple of the
 * texts keeps them alive), and the thread that encodes it makes its UTF-8
 * (_tki_str_utf8.c) into a buffer of its own: made with the GIL before the
 * threads start, as CPython makes it, it was the serial part of a batch of
 * such texts (2 threads: 1.65x one, against 2.05x for texts whose UTF-8 was
 * made) and stayed in each str as long as the str lived.  An item with a lone
 * surrogate in such a str is left to the calling thread, which takes that
 * str's UTF-8 as for any other str (its surrogates replaced, or None) and
 * encodes the item again.  The UTF-8 of other texts is taken with the GIL
 * before the threads start.  Without POSIX threads the calling thread does
 * all the items itself.
 */
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <errno.h>
#include <sys/time.h>
#define BATCH_HAVE_THREADS 1
#else
#define BATCH_HAVE_THREADS 0
#endif

#define BATCH_ITEM_BYTES ((size_t)16 << 10)
#define BATCH_MAX_THREADS 64
#define BATCH_NO_IDS SIZE_MAX               /* doc_counts[i] of a text that gets None           */
#define BATCH_BLOCK_IDS ((size_t)1 << 18)   /* ids per arena block (1 MiB), unless one item needs more */
#define BATCH_SIGNAL_CHECK_MS 20            /* a flat batch runs the signal handlers this often */
#define BATCH_FLAT_THREADED_BYTES ((size_t)64 << 10) /* a smaller flat batch: the caller alone */
#define BATCH_TEXTS_AHEAD 16                 /* batch_prepare loads the texts this far ahead */
#define BATCH_SURROGATE INT32_MIN           /* item_status: a lone surrogate; the caller redoes the item */

/* What the batch makes of its texts. */
typedef enum batch_output {
    BATCH_LISTS = 0,         /* a list per text (lone surrogates replaced); a non-str raises (the caller goes item by item) */
    BATCH_LISTS_OR_NONE = 1, /* a list per text, None for one it does not take (refused, surrogates, no str) */
    BATCH_FLAT = 2           /* one array of ids and the offsets; the first refused text is reported */
} batch_output;

/* Why a flat batch stopped before the end (batch.problem). */
typedef enum batch_problem {
    BATCH_PROBLEM_NONE = 0,
    BATCH_PROBLEM_REFUSED = 1, /* a document holds a refused special token's text */
    BATCH_PROBLEM_UTF8 = 2     /* a bytes document is not UTF-8                  */
} batch_problem;

/* What a flat batch's helpers do once every item is taken (batch.phase). */
typedef enum batch_phase {
    BATCH_ENCODING = 0, /* wait: the caller decides                   */
    BATCH_COPYING = 1,  /* the result is allocated: copy items into it */
    BATCH_ENDED = 2     /* nothing more (a problem, an error, a signal) */
} batch_phase;

/* A block of a thread's arena: ids[0..used) are written and never move. */
typedef struct arena_block {
    struct arena_block *previous; /* the thread's earlier block, or NULL */
    size_t capacity;
    size_t used;
    uint32_t ids[];
} arena_block;

typedef struct batch {
    const tki_vocab *vocab;
    int32_t pattern;
    const tki_pattern *compiled;        /* not NULL: splits instead of `pattern`          */
    batch_output output;
    const tki_special_matcher *refused; /* texts holding one of these: None, or the problem */
    const tki_special_matcher *allowed; /* these become their ids (NULL: none)            */
    int check_utf8;                     /* the documents are bytes: check they are UTF-8  */
    int64_t eot;                        /* appended to each document's ids, or -1         */
    /* Documents. */
    size_t doc_count;
    const uint8_t **doc_data;           /* document i is doc_data[i][0..doc_length[i]); NULL: it gets None */
    size_t *doc_length;
    uint8_t *doc_kind;                  /* 0, or a str's: doc_data are its characters (this many bytes
                                           each), doc_characters of them, and doc_length the most UTF-8
                                           they make, which the encoding thread makes of them */
    size_t *doc_characters;
    const uint32_t **doc_ids;           /* set by its thread: where its ids are */
    size_t *doc_counts;                 /* its number of ids (end-of-text included), or BATCH_NO_IDS */
    /* The texts the documents come from (several per text with `lines`). */
    size_t text_count;
    const uint8_t **text_data;
    size_t *text_doc_ends;              /* text j gave documents text_doc_ends[j-1] .. text_doc_ends[j] */
    /* Items. */
    size_t item_count;
    size_t *item_ends;                  /* item k: documents item_ends[k-1] .. item_ends[k] */
    size_t *item_room;                  /* the most ids item k can give */
    size_t total_room;                  /* the most ids all items can give */
    int32_t *item_status;               /* TKI_OK, or what went wrong in item k */
    size_t *done_order;                 /* under lock: the items done, in the order they finished */
    size_t done_count;                  /* under lock */
    size_t *item_order;                 /* the items in the order they are taken: the most ids first */
    size_t next_item;                   /* under lock: the next of item_order nobody has taken */
    size_t stop_item;                   /* under lock: items from this one on are not taken (a problem) */
    size_t taken_count;                 /* under lock: items taken */
    arena_block *arenas[BATCH_MAX_THREADS + 1]; /* by worker: 0 the calling thread */
    uint8_t *utf8[BATCH_MAX_THREADS + 1];       /* by worker: the UTF-8 it made of a str */
    size_t utf8_capacity[BATCH_MAX_THREADS + 1];
    PyObject *held;                     /* the texts (a tuple); only the calling thread, with the GIL */
    PyObject *keep;                     /* UTF-8 made with lone surrogates replaced (a list) */
    int accept_bytes;
    /* Flat: the first problem (under lock), then the copy to the result. */
    batch_problem problem;
    size_t problem_doc;                 /* SIZE_MAX: none */
    size_t problem_offset;              /* a byte offset in that document */
    batch_phase phase;                  /* under lock: what a helper does once no item is left */
    size_t next_copy;                   /* under lock: the next item nobody copies */
    size_t copied_count;                /* under lock */
    int64_t first_offset;               /* offsets[0]: where the result's ids start in a larger array */
    const int64_t *offsets;             /* the result's: document i's ids go to ids_out + offsets[i] - offsets[0] */
    uint8_t *ids_out;
    size_t id_bytes;                    /* 4 (uint32) or 2 (uint16) */
    int too_wide;                       /* an id did not fit id_bytes (under lock) */
#if BATCH_HAVE_THREADS
    int threaded;                       /* helpers run: take the lock (else it is not made) */
    int caller_waiting;                 /* under lock: the list builder waits for an item */
    pthread_mutex_t lock;
    pthread_cond_t changed;             /* an item is done, copying starts, a copy is done */
#endif
} batch;

typedef struct batch_worker {
    batch *run;
    size_t index; /* its arena */
} batch_worker;

static void batch_lock(batch *run)
{
#if BATCH_HAVE_THREADS
    if (run->threaded) pthread_mutex_lock(&run->lock);
#else
    (void)run;
#endif
}

static void batch_unlock(batch *run, int changed)
{
#if BATCH_HAVE_THREADS
    if (run->threaded) {
        if (changed) pthread_cond_broadcast(&run->changed);
        pthread_mutex_unlock(&run->lock);
    }
#else
    (void)run;
    (void)changed;
#endif
}

/*
 * Room for `room` ids at the end of a worker's arena: a pointer to them, or
 * NULL when memory ran out (the arena is unchanged).  arena_commit then says
 * how many were written.
 */
static uint32_t *arena_reserve(batch *run, size_t worker, size_t room)
{
    arena_block *block = run->arenas[worker];
    if (block != NULL && block->capacity - block->used >= room) return block->ids + block->used;
    /* A block for several items, but no larger than the whole batch needs. */
    size_t capacity = run->total_room < BATCH_BLOCK_IDS ? run->total_room : BATCH_BLOCK_IDS;
    if (capacity < room) capacity = room;
    if (capacity > (SIZE_MAX - sizeof(arena_block)) / sizeof(uint32_t)) return NULL;
    arena_block *fresh = PyMem_RawMalloc(sizeof(arena_block) + capacity * sizeof(uint32_t));
    if (fresh == NULL) return NULL;
    advise_huge_pages(fresh, sizeof(arena_block) + capacity * sizeof(uint32_t));
    fresh->previous = block;
    fresh->capacity = capacity;
    fresh->used = 0;
    run->arenas[worker] = fresh;
    return fresh->ids;
}

static void arena_commit(batch *run, size_t worker, size_t written)
{
    if (run->arenas[worker] != NULL) run->arenas[worker]->used += written;
}

static void arenas_free(batch *run)
{
    for (size_t worker = 0; worker <= BATCH_MAX_THREADS; worker++) {
        for (arena_block *block = run->arenas[worker], *previous; block != NULL; block = previous) {
            previous = block->previous;
            PyMem_RawFree(block);
        }
        run->arenas[worker] = NULL;
    }
}

/* Records a problem in item `item` at document `doc` (byte `offset`), and no
 * item after it is taken any more; the earliest document's problem is kept
 * (the items before it are still encoded, since they are taken largest first,
 * not in order, and may hold an earlier one).  Under lock. */
static void batch_note_problem(batch *run, batch_problem problem, size_t item, size_t doc, size_t offset)
{
    if (doc < run->problem_doc) {
        run->problem = problem;
        run->problem_doc = doc;
        run->problem_offset = offset;
    }
    if (item < run->stop_item) run->stop_item = item;
}

/* The next item to encode, now taken, or SIZE_MAX when none is left (under
 * lock): the next of item_order that lies before every problem. */
static size_t batch_next_item(batch *run)
{
    while (run->next_item < run->item_count) {
        const size_t item = run->item_order[run->next_item++];
        if (item < run->stop_item) {
            run->taken_count++;
            return item;
        }
    }
    return SIZE_MAX;
}

/* Whether every item taken is done and none is left to take (under lock). */
static int batch_encoded(const batch *run)
{
    return run->next_item >= run->item_count && run->done_count == run->taken_count;
}

/* Whether every item is copied (under lock). */
static int batch_copied(const batch *run)
{
    return run->copied_count == run->item_count;
}

/* The first of documents [first, end) that is not UTF-8, and in *offset where
 * its first bad byte is; SIZE_MAX if all are.  Documents that follow one
 * another in a text with a newline between them (the lines of a text) are
 * checked in one call: a call per short line cost several times the check of
 * its bytes.  A newline cannot be part of a longer character, so the run is
 * valid exactly where each of its lines is. */
static size_t batch_first_invalid(const batch *run, size_t first, size_t end, size_t *offset)
{
    for (size_t i = first; i < end;) {
        const uint8_t *start = run->doc_data[i];
        if (start == NULL) {
            i++;
            continue;
        }
        size_t last = i;
        const uint8_t *stop = start + run->doc_length[i];
        while (last + 1 < end && run->doc_data[last + 1] == stop + 1 && *stop == '\n') {
            last++;
            stop = run->doc_data[last] + run->doc_length[last];
        }
        const size_t length = (size_t)(stop - start);
        const uint8_t *bad = start + tki_utf8_valid_prefix(start, length);
        if (bad != stop) {
            for (size_t k = i; k <= last; k++) {
                if (bad < run->doc_data[k] + run->doc_length[k]) {
                    *offset = (size_t)(bad - run->doc_data[k]);
                    return k;
                }
            }
        }
        i = last + 1;
    }
    return SIZE_MAX;
}

/* A problem a flat batch met in an item: none, or what and where. */
typedef struct item_problem {
    batch_problem problem;
    size_t doc, offset;
} item_problem;

/* The UTF-8 of document i, a str's characters (doc_kind), made into worker's
 * buffer: TKI_OK, TKI_ERR_NOMEM, or BATCH_SURROGATE at a lone surrogate. */
static int32_t batch_str_utf8(batch *run, size_t worker, size_t i, const uint8_t **text, size_t *length)
{
    const size_t most = run->doc_length[i];
    if (most > run->utf8_capacity[worker]) {
        const size_t had = run->utf8_capacity[worker];
        const size_t capacity = had <= SIZE_MAX / 2 && had * 2 > most ? had * 2 : most;
        uint8_t *buffer = PyMem_RawMalloc(capacity);
        if (buffer == NULL) return TKI_ERR_NOMEM;
        PyMem_RawFree(run->utf8[worker]);
        run->utf8[worker] = buffer;
        run->utf8_capacity[worker] = capacity;
    }
    const size_t made = characters_to_utf8(run->doc_kind[i], run->doc_data[i], 0, run->doc_characters[i],
                                           run->utf8[worker]);
    if (made == SIZE_MAX) return BATCH_SURROGATE;
    *text = run->utf8[worker];
    *length = made;
    return TKI_OK;
}

/* Encodes the documents of `item` into the arena of `worker` (no Python object
 * is touched): TKI_OK, what went wrong, or BATCH_SURROGATE.  A flat batch
 * stops the item at its first problem (*problem). */
static int32_t batch_encode_documents(batch *run, size_t worker, size_t item, item_problem *problem)
{
    int32_t status = TKI_OK;
    problem->problem = BATCH_PROBLEM_NONE;
    const size_t first = item == 0 ? 0 : run->item_ends[item - 1];
    size_t invalid_offset = 0;
    const size_t invalid_doc =
        run->check_utf8 ? batch_first_invalid(run, first, run->item_ends[item], &invalid_offset) : SIZE_MAX;
    uint32_t *out = arena_reserve(run, worker, run->item_room[item]);
    size_t written = 0;
    if (out == NULL) status = TKI_ERR_NOMEM;
    for (size_t i = first; i < run->item_ends[item]; i++) run->doc_counts[i] = BATCH_NO_IDS;
    for (size_t i = first; i < run->item_ends[item] && status == TKI_OK; i++) {
        const uint8_t *text = run->doc_data[i];
        size_t length = run->doc_length[i];
        if (text == NULL) continue;
        if (i == invalid_doc) {
            *problem = (item_problem){BATCH_PROBLEM_UTF8, i, invalid_offset};
            break;
        }
        if (run->doc_kind[i] != 0 && (status = batch_str_utf8(run, worker, i, &text, &length)) != TKI_OK) break;
        if (run->refused != NULL) {
            size_t start = 0, found = 0;
            uint32_t string = 0;
            status = tki_special_matcher_find(run->refused, text, length, 0, &start, &string, 1, &found);
            if (status != TKI_OK) break;
            if (found > 0) {
                if (run->output != BATCH_FLAT) continue; /* None */
                *problem = (item_problem){BATCH_PROBLEM_REFUSED, i, start};
                break;
            }
        }
        size_t count = 0;
        if (length > 0) {
            status = encode_with(run->vocab, run->pattern, run->compiled, run->allowed, text, length, out + written,
                                 length, &count);
            if (status != TKI_OK) break;
        }
        if (run->eot >= 0) out[written + count++] = (uint32_t)run->eot;
        run->doc_ids[i] = out + written;
        run->doc_counts[i] = count;
        written += count;
    }
    arena_commit(run, worker, written);
    return status;
}

/* batch_encode_documents, then the item is done: its status set, the problem
 * noted and the calling thread woken if it waits for this. */
static void batch_encode_item(batch *run, size_t worker, size_t item)
{
    item_problem problem;
    const int32_t status = batch_encode_documents(run, worker, item, &problem);
    batch_lock(run);
    if (problem.problem != BATCH_PROBLEM_NONE) {
        batch_note_problem(run, problem.problem, item, problem.doc, problem.offset);
    }
    run->item_status[item] = status;
    run->done_order[run->done_count++] = item;
    /* The calling thread is woken only when it waits for this: the list builder
     * for any item, a flat batch's caller for the last one (a wake-up per item
     * cost ~3% of a flat batch in futex calls and context switches). */
    batch_unlock(run, run->output == BATCH_FLAT ? batch_encoded(run) : run->caller_waiting);
}

/* The next item nobody has taken (now taken), or SIZE_MAX. */
static size_t batch_take(batch *run)
{
    batch_lock(run);
    const size_t item = batch_next_item(run);
    /* Skipping the items after a problem can be what ends the encoding: wake the caller. */
    batch_unlock(run, item == SIZE_MAX && batch_encoded(run));
    return item;
}

/* Copies item's ids to their place in the result (flat), narrowed to id_bytes. */
static void batch_copy_item(batch *run, size_t item)
{
    const size_t first = item == 0 ? 0 : run->item_ends[item - 1], end = run->item_ends[item];
    const size_t count = (size_t)(run->offsets[end] - run->offsets[first]);
    const size_t at = (size_t)(run->offsets[first] - run->first_offset);
    if (count == 0) return;
    /* The documents of an item lie one after another in its thread's arena. */
    const uint32_t *from = run->doc_ids[first];
    if (run->id_bytes == 4) {
        memcpy(run->ids_out + at * 4, from, count * 4);
        return;
    }
    uint16_t *to = (uint16_t *)(void *)run->ids_out + at;
    uint32_t widest = 0;
    for (size_t k = 0; k < count; k++) {
        widest |= from[k];
        to[k] = (uint16_t)from[k];
    }
    if (widest > UINT16_MAX) {
        batch_lock(run);
        run->too_wide = 1;
        batch_unlock(run, 0);
    }
}

/* Items copied into the result until none is left (flat, in BATCH_COPYING). */
static void batch_copy_items(batch *run)
{
    for (;;) {
        batch_lock(run);
        const size_t item = run->next_copy < run->item_count ? run->next_copy++ : SIZE_MAX;
        batch_unlock(run, 0);
        if (item == SIZE_MAX) return;
        batch_copy_item(run, item);
        batch_lock(run);
        run->copied_count++;
        batch_unlock(run, run->copied_count == run->item_count);
    }
}

#if BATCH_HAVE_THREADS
/* A helper thread: items until none is left; then, in a flat batch, it waits
 * for the caller's decision and copies items into the result if it is made. */
static void *batch_helper(void *argument)
{
    const batch_worker *self = argument;
    batch *run = self->run;
    for (size_t item; (item = batch_take(run)) != SIZE_MAX;) batch_encode_item(run, self->index, item);
    if (run->output != BATCH_FLAT) return NULL;
    pthread_mutex_lock(&run->lock);
    while (run->phase == BATCH_ENCODING) pthread_cond_wait(&run->changed, &run->lock);
    const batch_phase phase = run->phase;
    pthread_mutex_unlock(&run->lock);
    if (phase == BATCH_COPYING) batch_copy_items(run);
    return NULL;
}
#endif

static int batch_redo_item(batch *run, size_t item);

/* The result lists of item's texts go to result: 0, or -1 with an exception set. */
static int batch_lists(batch *run, size_t item, PyObject *result)
{
    if (run->item_status[item] == BATCH_SURROGATE && batch_redo_item(run, item) != 0) return -1;
    if (run->item_status[item] != TKI_OK) {
        raise_status(run->item_status[item]);
        return -1;
    }
    for (size_t i = item == 0 ? 0 : run->item_ends[item - 1]; i < run->item_ends[item]; i++) {
        PyObject *list = NULL;
        if (run->doc_counts[i] == BATCH_NO_IDS) {
            Py_INCREF(Py_None);
            list = Py_None;
        } else if ((list = list_of_ids(run->doc_ids[i], run->doc_counts[i])) == NULL) {
            return -1;
        }
        PyList_SET_ITEM(result, (Py_ssize_t)i, list);
    }
    return 0;
}

/* Encodes `item` on the calling thread, without the GIL when `release_gil`;
 * then runs the signal handlers: 0, or -1 with an exception set. */
static int batch_encode_own_item(batch *run, size_t item, int release_gil)
{
    if (release_gil) {
        Py_BEGIN_ALLOW_THREADS
        batch_encode_item(run, 0, item);
        Py_END_ALLOW_THREADS
    } else {
        batch_encode_item(run, 0, item);
    }
    return PyErr_CheckSignals();
}

/*
 * The calling thread's part of a list batch: items of its own, and the lists
 * of every item done, in the order they finished (with the GIL, which it
 * releases around its own items when `release_gil` and while it waits).  0, or
 * -1 with an exception set.
 */
static int batch_run_lists(batch *run, PyObject *result, int release_gil)
{
    size_t built = 0;
    while (built < run->item_count) {
        batch_lock(run);
        const size_t finished = built < run->done_count ? run->done_order[built] : SIZE_MAX;
        const size_t item = finished == SIZE_MAX ? batch_next_item(run) : SIZE_MAX;
        batch_unlock(run, 0);
        if (finished != SIZE_MAX) {
            if (batch_lists(run, finished, result) != 0) return -1;
            built++;
        } else if (item != SIZE_MAX) {
            if (batch_encode_own_item(run, item, release_gil) != 0) return -1;
        } else {
#if BATCH_HAVE_THREADS
            /* Every item is taken and every one done is built: a helper has one
             * (alone, this thread finishes each item it takes). */
            Py_BEGIN_ALLOW_THREADS
            pthread_mutex_lock(&run->lock);
            run->caller_waiting = 1;
            while (run->done_count == built) pthread_cond_wait(&run->changed, &run->lock);
            run->caller_waiting = 0;
            pthread_mutex_unlock(&run->lock);
            Py_END_ALLOW_THREADS
            if (PyErr_CheckSignals() != 0) return -1;
#endif
        }
    }
    return 0;
}

/*
 * Waits until `finished(run)` holds (under lock).  With `check_signals`, the
 * GIL is released meanwhile and the signal handlers run every
 * BATCH_SIGNAL_CHECK_MS: -1 with an exception set when one raised (the batch
 * then takes no new items), else 0.  Without, the caller has released the GIL.
 */
static int batch_wait(batch *run, int (*finished)(const batch *), int check_signals)
{
#if BATCH_HAVE_THREADS
    if (!run->threaded) return 0;
    if (!check_signals) {
        pthread_mutex_lock(&run->lock);
        while (!finished(run)) pthread_cond_wait(&run->changed, &run->lock);
        pthread_mutex_unlock(&run->lock);
        return 0;
    }
    for (;;) {
        int done = 0;
        Py_BEGIN_ALLOW_THREADS
        struct timeval now;
        gettimeofday(&now, NULL);
        const long nanoseconds = (long)now.tv_usec * 1000L + BATCH_SIGNAL_CHECK_MS * 1000000L;
        const struct timespec until = {now.tv_sec + nanoseconds / 1000000000L, nanoseconds % 1000000000L};
        pthread_mutex_lock(&run->lock);
        int waited = 0;
        while (!(done = finished(run)) && waited != ETIMEDOUT) {
            waited = pthread_cond_timedwait(&run->changed, &run->lock, &until);
        }
        pthread_mutex_unlock(&run->lock);
        Py_END_ALLOW_THREADS
        if (done) return 0;
        if (PyErr_CheckSignals() != 0) {
            batch_lock(run);
            run->next_item = run->item_count;
            batch_unlock(run, 0);
            return -1;
        }
    }
#else
    (void)run;
    (void)finished;
    (void)check_signals;
    return 0;
#endif
}

/* A batch's helper threads and what they work on. */
typedef struct batch_helpers {
    size_t count;
#if BATCH_HAVE_THREADS
    pthread_t threads[BATCH_MAX_THREADS];
    batch_worker workers[BATCH_MAX_THREADS];
#endif
} batch_helpers;

/* Starts up to `wanted` helpers (fewer when a thread cannot be started: the
 * others then take its items); run->threaded says whether any runs. */
static void batch_start_helpers(batch *run, batch_helpers *helpers, size_t wanted)
{
    helpers->count = 0;
#if BATCH_HAVE_THREADS
    if (wanted > BATCH_MAX_THREADS) wanted = BATCH_MAX_THREADS;
    if (wanted == 0) return;
    if (pthread_mutex_init(&run->lock, NULL) != 0) return;
    if (pthread_cond_init(&run->changed, NULL) != 0) {
        pthread_mutex_destroy(&run->lock);
        return;
    }
    run->threaded = 1;
    while (helpers->count < wanted) {
        batch_worker *worker = &helpers->workers[helpers->count];
        worker->run = run;
        worker->index = helpers->count + 1;
        if (pthread_create(&helpers->threads[helpers->count], NULL, batch_helper, worker) != 0) break;
        helpers->count++;
    }
    if (helpers->count == 0) { /* none started: this thread alone, unlocked */
        run->threaded = 0;
        pthread_cond_destroy(&run->changed);
        pthread_mutex_destroy(&run->lock);
    }
#else
    (void)run;
    (void)wanted;
#endif
}

/* Ends the batch's helpers (no new items; a flat batch's helpers skip the copy
 * unless it began) and joins them, without the GIL. */
static void batch_stop_helpers(batch *run, batch_helpers *helpers)
{
#if BATCH_HAVE_THREADS
    if (helpers->count == 0) return;
    pthread_mutex_lock(&run->lock);
    run->next_item = run->item_count;
    if (run->phase == BATCH_ENCODING) run->phase = BATCH_ENDED;
    pthread_cond_broadcast(&run->changed);
    pthread_mutex_unlock(&run->lock);
    Py_BEGIN_ALLOW_THREADS
    for (size_t k = 0; k < helpers->count; k++) pthread_join(helpers->threads[k], NULL);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&run->changed);
    pthread_mutex_destroy(&run->lock);
    run->threaded = 0;
    helpers->count = 0;
#else
    (void)run;
    (void)helpers;
#endif
}

/* Frees what batch_prepare and the threads allocated (run may be partly set). */
static void batch_release(batch *run)
{
    arenas_free(run);
    for (size_t worker = 0; worker <= BATCH_MAX_THREADS; worker++) PyMem_RawFree(run->utf8[worker]);
    PyMem_RawFree(run->doc_data);
    PyMem_RawFree(run->doc_length);
    PyMem_RawFree(run->doc_kind);
    PyMem_RawFree(run->doc_characters);
    PyMem_RawFree(run->doc_ids);
    PyMem_RawFree(run->doc_counts);
    PyMem_RawFree(run->text_data);
    PyMem_RawFree(run->text_doc_ends);
    PyMem_RawFree(run->item_ends);
    PyMem_RawFree(run->item_room);
    PyMem_RawFree(run->item_status);
    PyMem_RawFree(run->item_order);
    PyMem_RawFree(run->done_order);
}

/* The number of documents `lines` makes of data[0..length): one per '\n', and
 * one more for a last line without it. */
static size_t lines_in(const uint8_t *data, size_t length)
{
    size_t count = 0;
    for (const uint8_t *at = data, *end = data + length; at < end; count++) {
        const uint8_t *newline = memchr(at, '\n', (size_t)(end - at));
        at = newline == NULL ? end : newline + 1;
    }
    return count;
}

/*
 * The UTF-8 of text `text` of a batch: its data and length, or NULL data (with
 * no exception) for a text that gets None.  Lone surrogates are replaced, as
 * encode_ordinary does (the new bytes go to `keep`, which holds them), except
 * in BATCH_LISTS_OR_NONE, where such a text gets None.  -1 with an exception
 * set for what the batch does not take.
 */
static int batch_text_utf8(const batch *run, PyObject *text, int accept_bytes, PyObject *keep,
                           const uint8_t **data, size_t *length)
{
    *data = NULL;
    *length = 0;
    Py_ssize_t size = 0;
    if (PyUnicode_Check(text)) {
        const char *utf8 = NULL;
        int kept = kept_utf8(text, &utf8, &size);
        if (kept <= 0) {
            if (kept < 0) return -1;
            if (run->output == BATCH_LISTS_OR_NONE) return 0;
            PyObject *replaced = module_utf8_replacing_surrogates(NULL, text);
            if (replaced == NULL || PyList_Append(keep, replaced) != 0) {
                Py_XDECREF(replaced);
                return -1;
            }
            Py_DECREF(replaced); /* `keep` holds it */
            utf8 = PyBytes_AS_STRING(replaced);
            size = PyBytes_GET_SIZE(replaced);
        }
        *data = (const uint8_t *)utf8;
        *length = (size_t)size;
        return 0;
    }
    if (accept_bytes && PyBytes_Check(text)) {
        *data = (const uint8_t *)PyBytes_AS_STRING(text);
        *length = (size_t)PyBytes_GET_SIZE(text);
        return 0;
    }
    if (run->output == BATCH_LISTS_OR_NONE) return 0;
    PyErr_Format(PyExc_TypeError, "expected str%s, got %.100s", accept_bytes ? " or bytes" : "",
                 Py_TYPE(text)->tp_name);
    return -1;
}

/* An item and its room, for sorting the items. */
typedef struct item_size {
    size_t room, item;
} item_size;

/* Most room first; equal rooms in document order. */
static int item_size_compare(const void *left, const void *right)
{
    const item_size *a = left, *b = right;
    if (a->room != b->room) return a->room > b->room ? -1 : 1;
    return a->item < b->item ? -1 : a->item > b->item;
}

/* run->item_order: the items, the most ids first.  0, or -1 out of memory. */
static int batch_order_items(batch *run)
{
    item_size *sizes = PyMem_RawMalloc((run->item_count + 1) * sizeof *sizes);
    if (sizes == NULL) return -1;
    for (size_t item = 0; item < run->item_count; item++) sizes[item] = (item_size){run->item_room[item], item};
    qsort(sizes, run->item_count, sizeof *sizes, item_size_compare);
    for (size_t k = 0; k < run->item_count; k++) run->item_order[k] = sizes[k].item;
    PyMem_RawFree(sizes);
    return 0;
}

/* The documents' arrays for doc_count documents: 0, or -1 out of memory (what was
 * allocated is freed by batch_release). */
static int batch_alloc_documents(batch *run, size_t doc_count)
{
    run->doc_count = doc_count;
    run->doc_data = PyMem_RawMalloc((doc_count + 1) * sizeof *run->doc_data);
    run->doc_length = PyMem_RawMalloc((doc_count + 1) * sizeof *run->doc_length);
    run->doc_kind = PyMem_RawCalloc(doc_count + 1, sizeof *run->doc_kind);
    run->doc_characters = PyMem_RawMalloc((doc_count + 1) * sizeof *run->doc_characters);
    run->doc_ids = PyMem_RawCalloc(doc_count + 1, sizeof *run->doc_ids);
    run->doc_counts = PyMem_RawMalloc((doc_count + 1) * sizeof *run->doc_counts);
    run->item_ends = PyMem_RawMalloc((doc_count + 1) * sizeof *run->item_ends);
    run->item_room = PyMem_RawMalloc((doc_count + 1) * sizeof *run->item_room);
    run->item_status = PyMem_RawMalloc((doc_count + 1) * sizeof *run->item_status);
    run->item_order = PyMem_RawMalloc((doc_count + 1) * sizeof *run->item_order);
    run->done_order = PyMem_RawMalloc((doc_count + 1) * sizeof *run->done_order);
    if (run->doc_data == NULL || run->doc_length == NULL || run->doc_kind == NULL || run->doc_characters == NULL ||
        run->doc_ids == NULL || run->doc_counts == NULL || run->item_ends == NULL || run->item_room == NULL ||
        run->item_status == NULL || run->item_order == NULL || run->done_order == NULL) {
        return -1;
    }
    return 0;
}

/*
 * Fills run's texts, documents and items from the tuple `held` (the batch's
 * vocabulary, output and options are set): with `lines` each line of a text is
 * a document, else each text is one.  0, or -1 with an exception set (what was
 * allocated is freed by batch_release).
 */
static int batch_prepare(batch *run, PyObject *held, int lines, int accept_bytes, PyObject *keep)
{
    const size_t text_count = (size_t)PyTuple_GET_SIZE(held);
    run->held = held;
    run->keep = keep;
    run->accept_bytes = accept_bytes;
    run->text_count = text_count;
    run->text_data = PyMem_RawCalloc(text_count + 1, sizeof *run->text_data);
    run->text_doc_ends = PyMem_RawMalloc((text_count + 1) * sizeof *run->text_doc_ends);
    /* With `lines` the documents are counted first, and each text's length kept for
     * cutting them; else text j is document j, written in place as it is read. */
    size_t *text_length = lines ? PyMem_RawMalloc((text_count + 1) * sizeof *text_length) : NULL;
    int status = -1;
    if (run->text_data == NULL || run->text_doc_ends == NULL || (lines && text_length == NULL) ||
        (!lines && batch_alloc_documents(run, text_count) != 0)) {
        PyErr_NoMemory();
        goto done;
    }
    size_t doc_count = 0;
    for (size_t j = 0; j < text_count; j++) {
        PyObject *text = PyTuple_GET_ITEM(held, (Py_ssize_t)j);
        /* Each text's header is read once, and the texts lie all over memory: those further
         * on are loaded early, so that their misses overlap (64,878 documents: this loop
         * 1.9 ms -> 1.4 ms, and on 16 threads it took an eighth of the batch, alone). */
        if (j + BATCH_TEXTS_AHEAD < text_count) {
            BINDING_PREFETCH(PyTuple_GET_ITEM(held, (Py_ssize_t)(j + BATCH_TEXTS_AHEAD)), 0);
        }
        const uint8_t *data = NULL;
        size_t length = 0;
        if (!lines && !accept_bytes && PyUnicode_Check(text) && utf8_not_made(text)) {
            /* A str read as its characters (doc_kind bytes each, doc_characters of them),
             * none of whose bytes the batch checks; doc_length: the most UTF-8 they make. */
            const uint8_t kind = (uint8_t)PyUnicode_KIND(text);
            const size_t characters = (size_t)PyUnicode_GET_LENGTH(text);
            run->doc_kind[j] = kind;
            run->doc_characters[j] = characters;
            data = PyUnicode_DATA(text);
            length = characters * utf8_most_per_character(kind);
        } else if (batch_text_utf8(run, text, accept_bytes, keep, &data, &length) != 0) {
            goto done;
        }
        run->text_data[j] = data;
        if (lines) {
            text_length[j] = length;
            doc_count += lines_in(data, length);
        } else {
            run->doc_data[j] = data;
            run->doc_length[j] = length;
            doc_count++;
        }
        run->text_doc_ends[j] = doc_count;
    }
    if (lines) {
        if (batch_alloc_documents(run, doc_count) != 0) {
            PyErr_NoMemory();
            goto done;
        }
        size_t doc = 0;
        for (size_t j = 0; j < text_count; j++) {
            const uint8_t *data = run->text_data[j];
            for (const uint8_t *at = data, *end = data + text_length[j]; at < end; doc++) {
                const uint8_t *newline = memchr(at, '\n', (size_t)(end - at));
                const uint8_t *line_end = newline == NULL ? end : newline;
                run->doc_data[doc] = at;
                run->doc_length[doc] = (size_t)(line_end - at);
                at = newline == NULL ? end : newline + 1;
            }
        }
    }
    /* Items: runs of documents of about BATCH_ITEM_BYTES (a document counts one
     * byte more than its length, so that runs of empty lines are cut too). */
    size_t item_bytes = 0, item_room = 0;
    const size_t per_doc = run->eot >= 0 ? 1 : 0;
    for (size_t i = 0; i < doc_count; i++) {
        item_bytes += run->doc_length[i] + 1;
        item_room += run->doc_length[i] + per_doc;
        if (item_bytes >= BATCH_ITEM_BYTES || i + 1 == doc_count) {
            run->item_room[run->item_count] = item_room;
            run->item_status[run->item_count] = TKI_OK;
            run->total_room += item_room;
            run->item_ends[run->item_count++] = i + 1;
            item_bytes = item_room = 0;
        }
    }
    run->stop_item = run->item_count;
    if (batch_order_items(run) != 0) {
        PyErr_NoMemory();
        goto done;
    }
    status = 0;
done:
    PyMem_RawFree(text_length);
    return status;
}

/*
 * Item `item` again on the calling thread (with the GIL), after a thread met a
 * lone surrogate in a str it read as characters: the UTF-8 of each str of the
 * item that has one is taken as any other text's (batch_text_utf8: its
 * surrogates replaced, or None; the others are still
 * read as characters, so that CPython keeps no UTF-8 in them), and the item is
 * encoded again, without the GIL, into the caller's arena.  0, or -1 with an
 * exception set.
 */
static int batch_redo_item(batch *run, size_t item)
{
    const size_t end = run->item_ends[item];
    for (size_t i = item == 0 ? 0 : run->item_ends[item - 1]; i < end; i++) {
        if (run->doc_kind[i] == 0) continue;
        const uint8_t *data = NULL;
        size_t length = 0;
        const int32_t made = batch_str_utf8(run, 0, i, &data, &length);
        if (made == TKI_OK) continue; /* no surrogate here: still read as characters */
        if (made != BATCH_SURROGATE) {
            raise_status(made);
            return -1;
        }
        /* (a document read as characters is text i itself) */
        if (batch_text_utf8(run, PyTuple_GET_ITEM(run->held, (Py_ssize_t)i), run->accept_bytes, run->keep, &data,
                            &length) != 0) {
            return -1;
        }
        run->doc_kind[i] = 0;
        run->doc_data[i] = run->text_data[i] = data;
        run->doc_length[i] = length;
    }
    item_problem problem;
    int32_t status;
    Py_BEGIN_ALLOW_THREADS
    status = batch_encode_documents(run, 0, item, &problem);
    Py_END_ALLOW_THREADS
    batch_lock(run);
    if (problem.problem != BATCH_PROBLEM_NONE) {
        batch_note_problem(run, problem.problem, item, problem.doc, problem.offset);
    }
    run->item_status[item] = status;
    batch_unlock(run, 0);
    return 0;
}

/* The number of bytes of the batch's documents. */
static size_t batch_bytes(const batch *run)
{
    size_t total = 0;
    for (size_t i = 0; i < run->doc_count; i++) total += run->doc_length[i];
    return total;
}

/*
 * The ids of each text of a sequence of str as lists, on up to `threads`
 * threads.  output BATCH_LISTS (encode_many): TypeError for an item that is
 * not a str (the caller then goes item by item, which says what is wrong); a
 * text with lone surrogates is encoded with them replaced, as encode_ordinary
 * does (it raised UnicodeEncodeError, and one such text sent the whole batch
 * text by text through Python).  BATCH_LISTS_OR_NONE
 * (encode_many_with_specials): such an item, and one that holds a refused
 * special token's text, gets None instead of its ids.
 */
static PyObject *encode_many(const binding *bound, PyObject *texts, Py_ssize_t threads, batch_output output)
{
    PyObject *held = PySequence_Tuple(texts); /* keeps the texts alive while the GIL is free */
    if (held == NULL) return NULL;
    PyObject *keep = PyList_New(0); /* the UTF-8 of texts whose lone surrogates were replaced */
    PyObject *result = NULL;
    batch run = {.vocab = bound->vocab,
                 .pattern = bound->pattern,
                 .compiled = bound->compiled,
                 .output = output,
                 .refused = output == BATCH_LISTS_OR_NONE ? bound->refused : NULL,
                 .allowed = bound->allowed,
                 .eot = -1,
                 .problem_doc = SIZE_MAX};
    if (keep == NULL || batch_prepare(&run, held, 0, 0, keep) != 0) goto done;
    if ((result = PyList_New((Py_ssize_t)run.doc_count)) == NULL) goto done;
    size_t wanted = threads < 1 ? 0 : (size_t)threads - 1;
    if (wanted > run.item_count - (run.item_count > 0)) wanted = run.item_count - (run.item_count > 0);
    batch_helpers helpers;
    batch_start_helpers(&run, &helpers, wanted);
    if (batch_run_lists(&run, result, helpers.count > 0 || batch_bytes(&run) >= (size_t)GIL_FREE_MIN_BYTES) != 0) {
        Py_CLEAR(result);
    }
    batch_stop_helpers(&run, &helpers);
done:
    batch_release(&run);
    Py_XDECREF(keep);
    Py_DECREF(held);
    return result;
}

/* (kind, text index, byte offset in that text) of a flat batch's problem. */
static PyObject *batch_problem_tuple(const batch *run)
{
    size_t low = 0, high = run->text_count; /* the text whose documents hold problem_doc */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (run->text_doc_ends[middle] <= run->problem_doc) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    const size_t offset = (size_t)(run->doc_data[run->problem_doc] - run->text_data[low]) + run->problem_offset;
    return Py_BuildValue("(snn)", run->problem == BATCH_PROBLEM_REFUSED ? "refused" : "utf8", (Py_ssize_t)low,
                         (Py_ssize_t)offset);
}

/*
 * The flat batch's result once every item is encoded without a problem: the
 * offsets and the ids array as bytearrays (made with the GIL), the ids copied
 * into the latter by every thread.  A new reference to (ids, offsets), or NULL
 * with an exception set.
 */
static PyObject *batch_flat_result(batch *run)
{
    for (size_t item = 0; item < run->item_count; item++) {
        if (run->item_status[item] != TKI_OK) return raise_status(run->item_status[item]);
    }
    if (run->doc_count > (size_t)PY_SSIZE_T_MAX / sizeof(int64_t) - 1) return PyErr_NoMemory();
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((run->doc_count + 1) * sizeof(int64_t)));
    if (offsets == NULL) return NULL;
    int64_t *at = (int64_t *)(void *)PyByteArray_AS_STRING(offsets);
    at[0] = run->first_offset;
    for (size_t i = 0; i < run->doc_count; i++) at[i + 1] = at[i] + (int64_t)run->doc_counts[i];
    const size_t total = (size_t)(at[run->doc_count] - at[0]);
    if (total > (size_t)PY_SSIZE_T_MAX / run->id_bytes) {
        Py_DECREF(offsets);
        return PyErr_NoMemory();
    }
    PyObject *ids = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total * run->id_bytes));
    if (ids == NULL) {
        Py_DECREF(offsets);
        return NULL;
    }
    run->offsets = at;
    run->ids_out = (uint8_t *)PyByteArray_AS_STRING(ids);
    advise_huge_pages(run->ids_out, total * run->id_bytes);
    Py_BEGIN_ALLOW_THREADS
    batch_lock(run);
    run->phase = BATCH_COPYING;
    batch_unlock(run, 1);
    batch_copy_items(run);
    batch_wait(run, batch_copied, 0);
    Py_END_ALLOW_THREADS
    if (run->too_wide) {
        Py_DECREF(ids);
        Py_DECREF(offsets);
        PyErr_Format(PyExc_ValueError, "an id does not fit in %zu bytes: write wider ids", run->id_bytes);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, ids, offsets);
    Py_DECREF(ids);
    Py_DECREF(offsets);
    return pair;
}

/*
 * encode_flat: the ids of every document of a sequence of texts in one array
 * (see the top of this file).  A new reference to (ids, offsets, None): ids a
 * bytearray of native uint32 (uint16 when id_bytes is 2), offsets one of
 * native int64 starting at first_offset, document i's ids being
 * ids[offsets[i] - first_offset:offsets[i + 1] - first_offset];
 * or (None, None, (kind, text index, byte offset)) for the first document, in
 * order, that holds a refused special token ("refused") or, from bytes, is not
 * UTF-8 ("utf8").  NULL with an exception set: TypeError for an item that is
 * neither str nor (accept_bytes) bytes, MemoryError, a signal handler's.
 */
static PyObject *encode_flat(const binding *bound, PyObject *texts, Py_ssize_t threads, int lines, int64_t eot,
                             size_t id_bytes, int accept_bytes, int64_t first_offset)
{
    PyObject *held = PySequence_Tuple(texts); /* keeps the texts alive while the GIL is free */
    if (held == NULL) return NULL;
    PyObject *keep = PyList_New(0); /* the UTF-8 of texts whose lone surrogates were replaced */
    PyObject *result = NULL;
    batch run = {.vocab = bound->vocab,
                 .pattern = bound->pattern,
                 .compiled = bound->compiled,
                 .output = BATCH_FLAT,
                 .refused = bound->refused,
                 .allowed = bound->allowed,
                 .check_utf8 = accept_bytes,
                 .eot = eot,
                 .id_bytes = id_bytes,
                 .first_offset = first_offset,
                 .problem_doc = SIZE_MAX};
    batch_helpers helpers = {0};
    if (keep == NULL || batch_prepare(&run, held, lines, accept_bytes, keep) != 0) goto done;
    /* A batch worth threads: helpers encode and the caller waits, running the
     * signal handlers; a small one: the caller alone, without the GIL. */
    size_t wanted = (size_t)(threads < 1 ? 1 : threads);
    if (wanted > run.item_count) wanted = run.item_count;
    if (batch_bytes(&run) < BATCH_FLAT_THREADED_BYTES) wanted = 0;
    batch_start_helpers(&run, &helpers, wanted);
    if (helpers.count > 0) {
        if (batch_wait(&run, batch_encoded, 1) != 0) goto done;
    } else {
        for (size_t item; (item = batch_take(&run)) != SIZE_MAX;) {
            if (batch_encode_own_item(&run, item, 1) != 0) goto done;
        }
    }
    for (size_t item = 0; item < run.item_count; item++) {
        if (run.item_status[item] == BATCH_SURROGATE && batch_redo_item(&run, item) != 0) goto done;
    }
    if (run.problem != BATCH_PROBLEM_NONE) {
        PyObject *problem = batch_problem_tuple(&run);
        if (problem != NULL) result = Py_BuildValue("(OON)", Py_None, Py_None, problem);
        goto done;
    }
    PyObject *pair = batch_flat_result(&run);
    if (pair != NULL) {
        result = Py_BuildValue("(OOO)", PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), Py_None);
        Py_DECREF(pair);
    }
done:
    batch_stop_helpers(&run, &helpers);
    batch_release(&run);
    Py_XDECREF(keep);
    Py_DECREF(held);
    return result;
}
