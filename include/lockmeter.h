/* lockmeter.h: name your locks in lockmeter's reports.
 *
 *     #include "lockmeter.h"
 *     pthread_mutex_init(&q->lock, NULL);
 *     lockmeter_name(&q->lock, "queue.lock");
 *
 * Call it after the lock's *_init: a name belongs to one lock identity (an *_init or *_destroy
 * starts a new one), and stays with it in the profile after the lock is destroyed.
 * Without lockmeter the call does nothing: lockmeter_name_lock is a weak symbol that only the
 * preload library (liblockmeter_preload.so, loaded by `lockmeter run`) defines. The name is copied
 * (up to 127 bytes); the call is cheap but not meant for hot paths.
 */
#ifndef LOCKMETER_H
#define LOCKMETER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Defined by the preload library; NULL when the program runs without lockmeter. */
extern void lockmeter_name_lock(const volatile void *lock, const char *name) __attribute__((weak));

/* Names the lock at `lock` (a pthread_mutex_t, pthread_rwlock_t or pthread_spinlock_t). */
static inline void lockmeter_name(const volatile void *lock, const char *name) {
    if (lockmeter_name_lock)
        lockmeter_name_lock(lock, name);
}

#ifdef __cplusplus
}
#endif

#endif /* LOCKMETER_H */
