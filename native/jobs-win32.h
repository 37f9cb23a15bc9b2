/*
 * jobs-win32.h — the job objects that hold a paced command's process tree on Windows
 * (jobs-win32.c, linked into the registry helper's DLL on Windows only; bound by
 * native/process-win32.ts). Every call returns a failure for a NULL job.
 */
#ifndef GPUSHARE_JOBS_WIN32_H
#define GPUSHARE_JOBS_WIN32_H

#include "gpushare.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Put process `pid` in a new job object that ends its members when its last handle closes (kill
 * on close); the processes it starts from then on join it. NULL when it cannot be done. */
GS_API void *gs_job_hold(uint32_t pid);
/* Suspend (resume = 0) or resume (resume = 1) every member: how many were reached, or -1 when
 * the members cannot be listed. */
GS_API int32_t gs_job_suspend(void *job, int32_t resume);
/* CPU time (user + kernel) of every process the job ever held, µs; -1 when it cannot be read. */
GS_API int64_t gs_job_cpu_us(void *job);
/* How many members run; -1 when it cannot be read. */
GS_API int32_t gs_job_alive(void *job);
/* End every member with exit_code: GS_OK, GS_ERR_ARG, or GS_ERR_OS when Windows refused. */
GS_API int32_t gs_job_terminate(void *job, uint32_t exit_code);
/* Close our handle: the members still in the job end with it. */
GS_API void gs_job_close(void *job);

#ifdef __cplusplus
}
#endif
#endif
