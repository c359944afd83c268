/* padfold's worker pool for Halide's parallel loops (pf_pool_*, padfold_runtime.h).
 *
 * Halide's own pool puts a worker to sleep after a few dozen yields without work, so each kernel of
 * a model run pays for waking it. Here an idle worker spins (a pause instruction per turn) for the
 * pool's spin window after the last loop it saw, and only then sleeps on a condition variable; a
 * model run (pf_model_run*) parks the workers when it returns, so that nothing spins between runs.
 *
 * One parallel loop runs at a time: a job on the caller's stack, published under the pool's mutex.
 * A worker joins it under the same mutex (taking a reference), takes indices with an atomic
 * counter, and drops its reference when none are left; the caller runs indices too, then withdraws
 * the job under the mutex and waits for the references to drop before its frame goes. A loop
 * called while another runs (another thread's kernel) or from inside a task (a nested loop) runs
 * serially on its caller. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sysconf under -std=c99 */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define PF_POOL_MAX_THREADS 256
#define PF_POOL_DEFAULT_SPIN_US 1000

typedef struct pf_job {
  pf_task_fn task;
  void* user_context;
  uint8_t* closure;
  int min, size;
  int next;  /* the next index to take (atomic) */
  int refs;  /* workers inside the job (atomic) */
  int error; /* the first nonzero task result (atomic) */
} pf_job;

struct pf_pool {
  int threads, spin_us, started;
  pthread_t* workers;
  pthread_mutex_t lock; /* job, sleepers, quit; workers wait on `wake` */
  pthread_cond_t wake;
  pthread_mutex_t submit; /* one parallel loop at a time */
  pf_job* job;
  unsigned gen;            /* bumped for each job (atomic) */
  long long spin_until_ns; /* idle workers spin until then (atomic) */
  int sleepers, quit;
};

static pf_pool* g_pool; /* the pool pf_bundle_use_pool installed (atomic) */

#if defined(__GNUC__) || defined(__clang__)
#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define CAS(p, expected, v) \
  __atomic_compare_exchange_n((p), (expected), (v), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#else
#error "pool.c needs GCC or Clang atomics"
#endif

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static __thread int t_inside; /* this thread runs a task of the pool (a worker, or a caller) */

/* Takes and runs indices until none is left or a task has failed (the rest are skipped). */
static void run_indices(pf_job* j) {
  int i, r, none = 0;
  while (!LOAD(&j->error) && (i = ADD(&j->next, 1)) < j->size) {
    if ((r = j->task(j->user_context, j->min + i, j->closure)) != 0) CAS(&j->error, &none, r);
    none = 0;
  }
}

/* Waits until a job later than *seen is published (or the pool quits): spinning while the spin
 * window is open, else asleep. */
static void wait_for_job(pf_pool* p, unsigned* seen) {
  int turns = 0;
  while (LOAD(&p->gen) == *seen && !LOAD(&p->quit)) {
    if ((++turns & 63) != 0 || now_ns() < LOAD(&p->spin_until_ns)) {
      cpu_relax();
      continue;
    }
    pthread_mutex_lock(&p->lock);
    while (p->gen == *seen && !p->quit && now_ns() >= LOAD(&p->spin_until_ns)) {
      p->sleepers++;
      pthread_cond_wait(&p->wake, &p->lock);
      p->sleepers--;
    }
    pthread_mutex_unlock(&p->lock);
  }
}

static void* worker_main(void* arg) {
  pf_pool* p = (pf_pool*)arg;
  unsigned seen = 0;
  pf_job* j;
  t_inside = 1;
  for (;;) {
    wait_for_job(p, &seen);
    pthread_mutex_lock(&p->lock);
    if (p->quit) {
      pthread_mutex_unlock(&p->lock);
      return NULL;
    }
    seen = p->gen;
    if ((j = p->job) != NULL) ADD(&j->refs, 1);
    pthread_mutex_unlock(&p->lock);
    if (!j) continue;
    run_indices(j);
    ADD(&j->refs, -1);
  }
}

static int run_serially(void* user_context, pf_task_fn f, int min, int size, uint8_t* closure) {
  int i, r;
  for (i = min; i < min + size; i++) {
    if ((r = f(user_context, i, closure)) != 0) return r;
  }
  return 0;
}

int pf_pool_do_par_for(pf_pool* p, void* user_context, pf_task_fn f, int min, int size,
                       uint8_t* closure) {
  pf_job j;
  int outer;
  if (!p || p->threads < 2 || size < 2 || t_inside || pthread_mutex_trylock(&p->submit) != 0) {
    return run_serially(user_context, f, min, size, closure);
  }
  j.task = f;
  j.user_context = user_context;
  j.closure = closure;
  j.min = min;
  j.size = size;
  j.next = 0;
  j.refs = 0;
  j.error = 0;
  pthread_mutex_lock(&p->lock);
  p->job = &j;
  ADD(&p->gen, 1u);
  STORE(&p->spin_until_ns, now_ns() + (long long)p->spin_us * 1000);
  if (p->sleepers) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  outer = t_inside;
  t_inside = 1;
  run_indices(&j);
  t_inside = outer;
  pthread_mutex_lock(&p->lock);
  p->job = NULL;
  pthread_mutex_unlock(&p->lock);
  while (LOAD(&j.refs) > 0) cpu_relax(); /* workers finishing their last index */
  STORE(&p->spin_until_ns, now_ns() + (long long)p->spin_us * 1000);
  pthread_mutex_unlock(&p->submit);
  return LOAD(&j.error);
}

static int installed_do_par_for(void* user_context, pf_task_fn f, int min, int size,
                                uint8_t* closure) {
  return pf_pool_do_par_for(LOAD(&g_pool), user_context, f, min, size, closure);
}

/* A model run ends: the installed pool's workers sleep now rather than spin out their window. */
static void park_installed(void) {
  pf_pool_park(LOAD(&g_pool));
}

static int cores(void) {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

pf_status pf_pool_create(const pf_pool_options* opts, pf_pool** out, char* err, size_t errlen) {
  pf_pool* p;
  int i, threads = opts ? opts->threads : 0, spin = opts ? opts->spin_us : -1;
  if (!out) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL out");
  *out = NULL;
  if (threads < 0 || threads > PF_POOL_MAX_THREADS || spin > 1000000) {
    return pf_fail(err, errlen, PF_ERR_ARGUMENT,
                   "pool of %d threads spinning %d us; expected 0 (the cores) to %d threads and a "
                   "spin window of at most 1000000 us (< 0: the default, %d)",
                   threads, spin, PF_POOL_MAX_THREADS, PF_POOL_DEFAULT_SPIN_US);
  }
  if (!(p = (pf_pool*)calloc(1, sizeof *p))) {
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  p->threads = threads ? threads : cores();
  p->spin_us = spin < 0 ? PF_POOL_DEFAULT_SPIN_US : spin;
  pthread_mutex_init(&p->lock, NULL);
  pthread_mutex_init(&p->submit, NULL);
  pthread_cond_init(&p->wake, NULL);
  if (p->threads > 1 &&
      !(p->workers = (pthread_t*)calloc((size_t)p->threads - 1, sizeof *p->workers))) {
    pf_pool_destroy(p);
    return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "out of memory");
  }
  for (i = 0; i + 1 < p->threads; i++) {
    if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
      pf_pool_destroy(p);
      return pf_fail(err, errlen, PF_ERR_NO_MEMORY, "cannot start worker thread %d of %d", i + 1,
                     p->threads - 1);
    }
    p->started++;
  }
  *out = p;
  return PF_OK;
}

int pf_pool_threads(const pf_pool* p) {
  return p ? p->threads : 0;
}

void pf_pool_park(pf_pool* p) {
  if (p) STORE(&p->spin_until_ns, 0LL);
}

int pf_pool_sleeping(pf_pool* p) {
  int n;
  if (!p) return 0;
  pthread_mutex_lock(&p->lock);
  n = p->sleepers;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void pf_pool_destroy(pf_pool* p) {
  int i;
  pf_pool* installed;
  if (!p) return;
  installed = p;
  if (CAS(&g_pool, &installed, NULL)) pf_model_run_end_hook = NULL;
  pthread_mutex_lock(&p->lock);
  p->quit = 1;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (i = 0; i < p->started; i++) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->submit);
  pthread_mutex_destroy(&p->lock);
  free(p->workers);
  free(p);
}

pf_status pf_bundle_use_pool(pf_bundle* b, pf_pool* p, char* err, size_t errlen) {
  pf_do_par_for_fn old = NULL;
  pf_status s;
  if (!b) return pf_fail(err, errlen, PF_ERR_ARGUMENT, "NULL bundle");
  if (!p) {
    if (!b->halide_do_par_for) return PF_OK;
    s = pf_bundle_set_do_par_for(b, b->halide_do_par_for, NULL, err, errlen);
    if (s == PF_OK) b->halide_do_par_for = NULL;
    return s;
  }
  if ((s = pf_bundle_set_do_par_for(b, installed_do_par_for, &old, err, errlen)) != PF_OK) return s;
  if (old != installed_do_par_for) b->halide_do_par_for = old;
  STORE(&g_pool, p);
  pf_model_run_end_hook = park_installed;
  return PF_OK;
}
