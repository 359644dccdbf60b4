// flight_job.h: the flight recorder of a job (common/flight.h holds the
// ring). Each rank's ring lives in memory its host-mates map, so a rank can
// read the ring of a host-mate that is stopped or dead. When something goes
// wrong (a fault: never a configuration refusal or a stop asked for) the
// rings are written as records into
// $VGPU_FLIGHT_DIR/<job>/rank<R>-<host>-<pid>.flight (default directory
// $TMPDIR/vgpu-flight-<uid>, env.h; never the working directory), and one
// rank of each host prints the verdict over what its host can see (on one
// host: the whole job) and where the records are. `vgpu-flight DIR` prints
// it again from the records, for a job that died.
#ifndef VGPU_FLIGHT_JOB_H
#define VGPU_FLIGHT_JOB_H

#include <mpi.h>

// Joins: the rings in host shared memory over `local`, and the job's name
// agreed over `world`.
// Collective over world. Returns 0, or a negative status (recording then
// stays in the process: records are still written, host-mates cannot read
// this rank's ring).
int flight_job_join(MPI_Comm world, MPI_Comm local, int rank, int size, const char *host);

// Leaves the shared memory before it is freed (recording goes on in the
// process). Collective over `local`.
void flight_job_leave(void);

// Why records are written.
enum flight_event {
    FLIGHT_EVENT_FATAL,   // a fatal error ends the job (a collective timeout among them)
    FLIGHT_EVENT_STOP,    // a stop signal (the first one)
    FLIGHT_EVENT_INSPECT, // SIGUSR2: "what is it doing?"; the job goes on
};

// Writes the records the event calls for and prints what it calls for:
//  FATAL: every host-mate's record; the verdict, when a collective is stuck
//         (once a host).
//  STOP: when a host-mate is stopped or dead (a fault: mpirun's SIGTERM
//        after a rank died), every host-mate's record and the verdict (once
//        a host); else nothing (a stop someone asked for is no fault).
//  INSPECT: this rank's record; this rank's last collectives.
// `why` names the cause in the records ("fatal", "SIGTERM", ...). Safe to
// call from any thread, before flight_job_join too (records of this rank
// only). Never fails the caller: problems are reported and skipped.
void flight_job_event(enum flight_event event, const char *why);

// The directory of this job's records ("" before the job's name is known).
const char *flight_job_dir(void);

#endif
