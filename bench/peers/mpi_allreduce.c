/* The OpenMPI peer of edt-bench allreduce: the same size sweep, timing and
 * CSV columns, so bench/compare_allreduce can put both in one table.
 *
 *   mpirun -np 2 mpi-allreduce-bench [--min-bytes N] [--max-bytes N]
 *          [--dtype float32|float64|int32|int64] [--iters N] [--csv FILE]
 *
 * Timing: per size, warm-up iterations, a barrier, then `iters` back-to-back
 * allreduces; time = elapsed / iters on rank 0, as in edt-bench. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Same rule as the other benchmarks: ~2 GB moved per size, 5 to 1000 iterations. */
static int iters_for(size_t bytes) {
  double n = 2e9 / (double)(bytes ? bytes : 1);
  if (n > 1000) n = 1000;
  if (n < 5) n = 5;
  return (int)n;
}

static size_t parse_bytes(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t min_bytes = 4, max_bytes = 256u << 20;
  const char* dtype = "float32";
  const char* csv_path = NULL;
  int fixed_iters = 0; /* --iters: timed iterations per size; 0: by size */
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--min-bytes") && i + 1 < argc) min_bytes = parse_bytes(argv[++i]);
    else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = parse_bytes(argv[++i]);
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
    else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) fixed_iters = atoi(argv[++i]);
    else {
      if (rank == 0) fprintf(stderr, "mpi-allreduce-bench: unknown argument '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Datatype type = MPI_FLOAT;
  size_t elem = 4;
  if (!strcmp(dtype, "float32")) { type = MPI_FLOAT; elem = 4; }
  else if (!strcmp(dtype, "float64")) { type = MPI_DOUBLE; elem = 8; }
  else if (!strcmp(dtype, "int32")) { type = MPI_INT; elem = 4; }
  else if (!strcmp(dtype, "int64")) { type = MPI_LONG_LONG; elem = 8; }
  else {
    if (rank == 0) fprintf(stderr, "mpi-allreduce-bench: dtype '%s' not supported (float32, float64, int32, int64)\n", dtype);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (min_bytes < elem) min_bytes = elem;
  char* send = malloc(max_bytes);
  char* recv = malloc(max_bytes);
  memset(send, 0, max_bytes);
  memset(recv, 0, max_bytes);
  FILE* csv = NULL;
  if (rank == 0 && csv_path) {
    csv = fopen(csv_path, "w");
    if (!csv) { perror(csv_path); MPI_Abort(MPI_COMM_WORLD, 1); }
    fprintf(csv, "bytes,count,dtype,op,time_us,algbw_gbps,busbw_gbps,wrong\n");
  }
  if (rank == 0) printf("%12s %12s %8s %5s %12s %10s %10s\n", "size(B)", "count", "type", "op", "time(us)", "algbw", "busbw");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    int count = (int)(bytes / elem);
    int iters = fixed_iters > 0 ? fixed_iters : iters_for(bytes);
    for (int i = 0; i < iters / 10 + 2; ++i) MPI_Allreduce(send, recv, count, type, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) MPI_Allreduce(send, recv, count, type, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters;
    double algbw = (double)bytes / t / 1e9;
    double busbw = algbw * 2.0 * (size - 1) / size;
    if (rank == 0) {
      printf("%12zu %12d %8s %5s %12.2f %10.3f %10.3f\n", bytes, count, dtype, "sum", t * 1e6, algbw, busbw);
      if (csv) fprintf(csv, "%zu,%d,%s,sum,%.3f,%.4f,%.4f,0\n", bytes, count, dtype, t * 1e6, algbw, busbw);
      fflush(stdout);
    }
  }
  if (csv) fclose(csv);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
