/*
 * jobs-win32.c — a paced command's process tree on Windows, for the process gate (linked into the
 * registry helper's DLL, bound by native/process-win32.ts).
 *
 * The command is put in a job object right after it starts; the processes it starts from then on
 * join the job too (unless they ask to break away). The gate suspends and resumes every member
 * (NtSuspendProcess / NtResumeProcess, one by one: Windows has no "suspend the job"), reads the
 * job's CPU accounting (which keeps the time of members that already exited) and can end them all.
 * The job is created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when the last handle to it closes
 * (the supervisor exits, or is killed), Windows terminates every member, so none outlives it.
 */
#if defined(_WIN32)
#include "jobs-win32.h"

#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <stdlib.h>

typedef LONG(NTAPI *gs_nt_process_fn)(HANDLE);

/* Up to this many members are listed per call; more than that is not a process tree we pace. */
#define GS_JOB_MAX_MEMBERS 1024

typedef struct gs_job_pid_list {
    DWORD assigned;
    DWORD listed;
    ULONG_PTR pids[GS_JOB_MAX_MEMBERS];
} gs_job_pid_list;

GS_API void *gs_job_hold(uint32_t pid) {
    HANDLE job = CreateJobObjectW(NULL, NULL);
    if (job == NULL) return NULL;
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits;
    ZeroMemory(&limits, sizeof limits);
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    HANDLE process = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, FALSE, (DWORD)pid);
    if (process == NULL || !SetInformationJobObject(job, JobObjectExtendedLimitInformation, &limits, sizeof limits) ||
        !AssignProcessToJobObject(job, process)) {
        if (process != NULL) CloseHandle(process);
        CloseHandle(job);
        return NULL;
    }
    CloseHandle(process);
    return job;
}

/* Suspend (resume = 0) or resume (resume = 1) every member; returns how many were reached, or -1
 * when the job's members cannot be listed. */
GS_API int32_t gs_job_suspend(void *job, int32_t resume) {
    if (job == NULL) return -1;
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    if (ntdll == NULL) return -1;
    gs_nt_process_fn apply = (gs_nt_process_fn)(void *)GetProcAddress(ntdll, resume ? "NtResumeProcess" : "NtSuspendProcess");
    if (apply == NULL) return -1;
    gs_job_pid_list *list = (gs_job_pid_list *)calloc(1, sizeof *list);
    if (list == NULL) return -1;
    int32_t reached = -1;
    if (QueryInformationJobObject((HANDLE)job, JobObjectBasicProcessIdList, list, sizeof *list, NULL)) {
        reached = 0;
        for (DWORD i = 0; i < list->listed; i++) {
            HANDLE h = OpenProcess(PROCESS_SUSPEND_RESUME, FALSE, (DWORD)list->pids[i]);
            if (h == NULL) continue; /* it exited since the list was taken */
            if (apply(h) >= 0) reached++;
            CloseHandle(h);
        }
    }
    free(list);
    return reached;
}

/* CPU time of every process the job ever held (user + kernel), µs; -1 when it cannot be read. */
GS_API int64_t gs_job_cpu_us(void *job) {
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION accounting;
    if (job == NULL || !QueryInformationJobObject((HANDLE)job, JobObjectBasicAccountingInformation, &accounting, sizeof accounting, NULL)) return -1;
    return (accounting.TotalUserTime.QuadPart + accounting.TotalKernelTime.QuadPart) / 10;
}

/* How many members are running; -1 when it cannot be read. */
GS_API int32_t gs_job_alive(void *job) {
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION accounting;
    if (job == NULL || !QueryInformationJobObject((HANDLE)job, JobObjectBasicAccountingInformation, &accounting, sizeof accounting, NULL)) return -1;
    return (int32_t)accounting.ActiveProcesses;
}

/* End every member with exit_code. GS_OK, or GS_ERR_OS when Windows refused. */
GS_API int32_t gs_job_terminate(void *job, uint32_t exit_code) {
    if (job == NULL) return GS_ERR_ARG;
    return TerminateJobObject((HANDLE)job, exit_code) ? GS_OK : GS_ERR_OS;
}

/* Close our handle: the members still in it end with it (kill on close). */
GS_API void gs_job_close(void *job) {
    if (job != NULL) CloseHandle((HANDLE)job);
}
#endif
