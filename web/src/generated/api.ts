// Generated from api/openapi.json by web/scripts/generate-api.mjs; do not edit.
// Run `npm run generate` in web/ after changing the document.
/* eslint-disable */

export type Error = {
  error: ErrorDetail;
};

export type ErrorDetail = {
  status: number;
  /** what was wrong: a body field's JSON path such as mounts[1].path, a path or query parameter's name such as name, a header's name such as Authorization, or empty for the request as a whole */
  field: string;
  message: string;
  fix: string;
};

/** what edtd reads of any request, before a route sees it: the request line (method, path, query) at most x-edt-max-uri-bytes bytes (else 414), each header line at most x-edt-max-header-bytes and all of them at most x-edt-max-headers-bytes (else 431), a POST or PATCH with a Content-Length (else 411), a body of at most x-edt-bytes.maximum bytes (else 413), JSON whose objects and arrays nest at most x-edt-max-depth deep, the body's object counting 1, with each key once per object (else 400), and path and query parameters in UTF-8 (else 400). Each body holds only the fields its schema lists, each of its type (else 422). */
export type RequestLimits = Record<string, unknown>;

export type Health = {
  ok: boolean;
};

/** a DNS label short enough that '<name>-worker-NN' stays one (63) */
export type ClusterName = string;

/** a volume, image or user name: a DNS label */
export type ResourceName = string;

export type Framework = "horovod" | "deepspeed" | "megatron" | "slurm";

/** one launcher and the rest workers */
export type ContainerCount = number;

/** whole devices per container */
export type GpuCount = number;

/** GPUs per container; count defaults to 1 when a model is named; null or count 0: none */
export type GpuRequest = {
  model?: string;
  count?: GpuCount;
} | null;

/** a Megatron-LM model-parallel degree: how many GPUs share one copy of the model along that dimension */
export type ParallelSize = number;

/** framework megatron only: the tensor and pipeline parallel sizes the job will use (each 1 when absent); edtd refuses a cluster, or a scale, whose GPUs (containers x GPUs per container, 1 per container without GPUs) do not divide by tensor_parallel x pipeline_parallel */
export type MegatronParallel = {
  tensor_parallel?: ParallelSize;
  pipeline_parallel?: ParallelSize;
} | null;

/** the most memory each container may use, its processes and its /dev/shm together (beyond it the kernel's OOM killer stops a process of that container): bytes, or a number with a binary unit as for shm, e.g. 8Gi; at least minimum bytes and 64Mi more than shm; absent or null: no bound */
export type MemoryLimit = string | number | null;

/** the most CPU time each container may use, in CPUs (1.5: one and a half cores' time; beyond it the kernel throttles the container's processes): a positive decimal with at most 3 decimals, as a string (e.g. '1.5') or a number (1.5); between minimum and maximum thousandths of a CPU (0.01 to 1024); absent or null: no bound */
export type CpuLimit = string | number | null;

/** the size of /dev/shm: bytes, or a number with a binary unit (case does not matter), e.g. 512M or 1Gi; between minimum and maximum bytes */
export type ShmSize = string | number;

/** how long a container that leaves on scale-down may keep running while the workers of an edtrun job in it leave the job (it leaves the hostfile at once, is Draining, and is stopped as soon as no such worker is left, or at this deadline): a number with a unit (ms, s, m, h), e.g. 60s or 2m, or whole seconds as a number; 0 stops it at once; default 60s */
export type DrainTimeout = string | number;

/** absolute and normalised (no '.', '..', '//' or trailing '/'); not /, /root, or over or inside a system directory; no control character; at most 4095 bytes (PATH_MAX) */
export type MountPath = string;

/** path defaults to /root/<volume> */
export type Mount = {
  volume: string;
  path?: MountPath;
  read_only?: boolean;
};

/** variables set in every container */
export type Env = Record<string, EnvValue>;

/** no control character (newline, tab, NUL), no double quote and no backslash: sshd's configuration and a shell would read them otherwise than written */
export type EnvValue = string;

/** an elastic cluster gives max_containers (and min_containers, default: containers): the scheduler keeps it between min and max, growing it into GPUs no team's guarantee needs and taking back only what it borrowed, by draining (docs/scheduling.md); containers is where it starts, between the two */
export type ClusterSpec = {
  name: ClusterName;
  framework: Framework;
  containers: ContainerCount;
  image?: string;
  gpu?: GpuRequest;
  shm?: ShmSize;
  memory?: MemoryLimit;
  cpus?: CpuLimit;
  mounts?: Mount[];
  env?: Env;
  drain_timeout?: DrainTimeout;
  megatron?: MegatronParallel;
  min_containers?: ContainerCount;
  max_containers?: ContainerCount;
  priority?: Priority;
};

/** orders the queue: higher first, then the oldest */
export type Priority = number;

/** a create or scale that waits for GPUs; cancel it by deleting the cluster (a create) or by scaling again (a scale) */
export type QueuedRequest = {
  /** the size it waits for */
  containers: number;
  /** 1: the next request for its GPU model */
  position: number;
  reason: string;
  /** unix milliseconds it was queued */
  since: number;
};

/** drain_timeout, when given, becomes the cluster's setting from this scale on */
export type Scale = {
  containers: ContainerCount;
  drain_timeout?: DrainTimeout;
};

export type ClusterPhase = "Pending" | "Creating" | "Running" | "Scaling" | "Failed" | "Deleting";

/** Draining: left the hostfile on scale-down, stopped once no worker of an edtrun job is left in it (or at the cluster's drain_timeout) */
export type ContainerPhase = "Pending" | "Creating" | "Running" | "Draining" | "Stopping" | "Failed";

export type Container = {
  name: string;
  role: "launcher" | "worker";
  /** 0: the launcher; i+1: worker-i */
  index: number;
  phase: ContainerPhase;
  message: string;
  hostname: string;
  address: string;
  gpus: number[];
  /** unix seconds it became Running; 0 before */
  started_at: number;
  /** edtd --backend slurm only: the Slurm node it runs on; empty while its job is pending */
  node?: string;
  /** edtd --backend slurm only: the Slurm job that holds it */
  slurm_job?: number;
};

export type ClusterStatus = {
  phase: ClusterPhase;
  message: string;
  containers: Container[];
  /** the request that waits for GPUs; null: none */
  queued?: QueuedRequest | null;
};

export type Cluster = {
  name: ClusterName;
  framework: Framework;
  containers: ContainerCount;
  image: string;
  gpu: GpuRequest;
  /** as edtd writes sizes, e.g. 64Mi */
  shm: string;
  /** each container's memory bound as edtd writes sizes, e.g. 8Gi; null: no bound */
  memory: string | null;
  /** each container's CPU bound in CPUs as edtd writes it, e.g. 1.5 (exactly as asked, trailing zeros dropped); null: no bound */
  cpus: string | null;
  mounts: Mount[];
  env: Env;
  /** as edtd writes durations, e.g. 60s or 1500ms */
  drain_timeout: string;
  megatron?: MegatronParallel;
  min_containers?: ContainerCount;
  max_containers?: ContainerCount;
  priority?: Priority;
  /** the owner's team; empty: none */
  team?: string;
  owner: string;
  /** unix seconds */
  created_at: number;
  status: ClusterStatus;
};

export type ClusterList = {
  clusters: Cluster[];
};

export type EventType = "Created" | "Scaling" | "Running" | "Failed" | "Restarted" | "Deleting" | "Drained" | "DrainTimedOut" | "Queued" | "Scheduled";

export type Event = {
  /** UTC, ISO 8601 with milliseconds */
  time: string;
  type: EventType;
  message: string;
};

export type EventList = {
  events: Event[];
};

export type SshAccess = {
  private_key: string;
  /** an OpenSSH known_hosts file that trusts the cluster's SSH host certificate authority (@cert-authority); use it with StrictHostKeyChecking=yes */
  known_hosts: string;
  /** the port of the containers' sshd, unless a container gives its own */
  port: number;
  /** who to log in as: root, or with edtd --backend slurm --slurm-mode user edtd's own user, as whom the containers run */
  user: string;
  containers: {
    name: string;
    /** where edtd's host reaches the container's sshd: the container's address, or with --slurm-mode user its node's */
    address: string;
    /** the port of the container's sshd: the top-level port, or with --slurm-mode user one of its own */
    port: number;
  }[];
};

export type JobState = "Running" | "Succeeded" | "Failed";

export type JobRequest = {
  /** run by sh -c */
  command: string;
  /** default: the launcher */
  container?: string;
  cwd?: JobDirectory;
};

/** the directory the command starts in, in the container: absolute, no '.' or '..' segment, no control character; default: the path where the cluster mounts its first volume (as Jupyter does), else the container user's home */
export type JobDirectory = string;

export type JobStarted = {
  id: number;
  cluster: string;
  container: string;
  state: JobState;
};

export type Job = {
  id: number;
  cluster: string;
  container: string;
  owner: string;
  command: string;
  state: JobState;
  /** -1 until the job ends */
  exit_code: number;
  message: string;
  /** unix seconds */
  created_at: number;
  /** unix seconds; 0 while it runs */
  finished_at: number;
};

export type JobList = {
  jobs: Job[];
};

/** no fields: an empty body or {} */
export type TerminalRequest = Record<string, unknown>;

export type Terminal = {
  port: number;
  path: string;
  /** seconds the path stays valid */
  expires_in: number;
};

/** no fields: an empty body or {} */
export type JupyterRequest = Record<string, unknown>;

export type JupyterSession = {
  /** path on edtd: opening it sets the Jupyter session cookie */
  url: string;
  /** seconds the link stays valid (it works once) */
  expires_in: number;
};

export type VolumeRequest = {
  name: ResourceName;
  /** admin only: an existing host directory */
  host_path?: string;
};

export type Volume = {
  name: ResourceName;
  owner: string;
  host_path: string;
  /** a directory edtd made (removed with the volume) */
  managed: boolean;
};

export type VolumeEntry = {
  name: string;
  type: "file" | "directory" | "link" | "other";
  /** a file's size; 0 for the rest */
  bytes: number;
  /** unix seconds */
  modified: number;
};

export type VolumeListing = {
  volume: ResourceName;
  /** the directory listed; empty: the volume's top */
  path: string;
  entries: VolumeEntry[];
  /** more entries than were listed */
  truncated: boolean;
};

export type VolumeFileDeleted = {
  deleted: VolumeFilePath;
  /** how many files, links and directories went */
  entries: number;
};

export type VolumeList = {
  volumes: Volume[];
};

/** a file's path relative to its volume's directory */
export type VolumeFilePath = string;

/** a file's bytes, as they are */
export type VolumeFileUpload = string;

export type VolumeFile = {
  volume: ResourceName;
  path: VolumeFilePath;
  bytes: number;
};

export type Deleted = {
  deleted: string;
};

export type ImageRequest = {
  name: ResourceName;
  /** an unpacked root file system with a /usr; / for the host's */
  root?: string;
  frameworks: Framework[];
};

export type ImageRegistered = {
  name: string;
  root: string;
  frameworks: Framework[];
};

export type Image = {
  name: string;
  root: string;
  frameworks: Framework[];
  builtin: boolean;
  /** an imported image: the path it was imported from; a pulled one: its reference (registry/repository:tag); empty for the built-in image and a registered root */
  source: string;
  /** an imported image: its manifest's digest (sha256:...); empty otherwise */
  digest: string;
  /** an imported image: the unpacked bytes of its layers */
  size_bytes: number;
  /** the image config's Env (NAME=value), which its containers start from */
  env: string[];
  /** the image config's WorkingDir: where jobs start */
  working_dir: string;
  /** the image config's User (recorded; containers run as root) */
  user: string;
  /** the image config's Labels */
  labels: Record<string, string>;
};

export type ImageImportRequest = {
  name: ResourceName;
  /** the absolute path on edtd's host of an OCI image layout (a directory, or a tar of one, plain, gzip or zstd) or a docker/podman save archive; not under edtd's data directory */
  path: string;
  /** default: the edt frameworks the image's label org.edt.frameworks names, else horovod */
  frameworks?: Framework[];
};

export type ImagePullRequest = {
  /** REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:HEX; no registry: Docker Hub */
  reference: string;
  name?: ResourceName;
  /** the registry's user; with password, used for this pull only and never stored */
  username?: string;
  /** the registry's password or token; never stored, logged or shown */
  password?: string;
  /** default: the edt frameworks the image's label org.edt.frameworks names, else horovod */
  frameworks?: Framework[];
};

export type ImagePulled = {
  image: Image;
  /** manifests, config and layers fetched from the registry */
  fetched_blobs: number;
  /** their bytes, as received */
  fetched_bytes: number;
  /** blobs the store had already: not fetched */
  reused_blobs: number;
};

export type ImagePullProgress = {
  name: ResourceName;
  /** what is pulled: REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:HEX */
  reference: string;
  /** unix seconds the pull's request came */
  started_at: number;
  /** waiting: for another pull or import to leave the image store; resolving: the manifests and the config; fetching: the layers, each unpacked as soon as it is stored whole; unpacking: every layer stored, the last ones unpacked and the root assembled */
  phase: "waiting" | "resolving" | "fetching" | "unpacking";
  /** the image's layers; 0 until resolved */
  layers: number;
  /** of those, stored whole and verified (those the store had count) */
  layers_fetched: number;
  /** of those, unpacked (those the store had count) */
  layers_unpacked: number;
  /** the layers' bytes as the manifest declares them (compressed); 0 until resolved */
  bytes: number;
  /** of those, stored so far, the layer under way's included (those the store had count) */
  bytes_fetched: number;
};

export type ImagePullList = {
  pulls: ImagePullProgress[];
};

export type ImageList = {
  images: Image[];
};

export type Gpu = {
  index: number;
  model: string;
  simulated: boolean;
  /** the container that holds it, if it is yours (the admin sees every holder); empty when free or held by another user's container */
  holder: string;
  /** whether a container holds it, whoever owns that */
  held: boolean;
};

export type GpuList = {
  gpus: Gpu[];
};

export type User = {
  name: string;
  admin: boolean;
  /** empty: none */
  team?: string;
};

export type UserTeam = {
  /** a team's name, or empty to take the user out of theirs */
  team: string;
};

export type TeamRequest = {
  name: ResourceName;
};

/** a team's share of one GPU model: guaranteed GPUs are its own whenever it asks (borrowers give them back by draining); it may hold up to guaranteed + borrow_limit */
export type QuotaRequest = {
  guaranteed: QuotaCount;
  borrow_limit: QuotaCount;
};

export type QuotaCount = number;

export type QuotaUsage = {
  gpu_model: string;
  guaranteed: number;
  borrow_limit: number;
  /** GPUs its members' containers hold now, draining ones included */
  in_use: number;
  /** in_use beyond guaranteed */
  borrowed: number;
  /** GPUs its queued requests wait for */
  pending: number;
};

export type Team = {
  name: string;
  members: string[];
  quotas: QuotaUsage[];
};

export type TeamList = {
  teams: Team[];
};

export type UserList = {
  users: User[];
};

export type UserRequest = {
  name: ResourceName;
};

/** an empty body or {} makes a token that never expires */
export type TokenRequest = {
  expires_in?: TokenLifetime;
  description?: TokenDescription;
};

/** how long the token works from now: a whole number with a unit (s, m, h, d), e.g. 90d or 12h, or whole seconds as a number; from 1s to 365d; without it the token never expires */
export type TokenLifetime = string | number;

/** what the token is for, shown in lists (e.g. ci runner) */
export type TokenDescription = string;

/** a token's id, from its list */
export type TokenId = number;

export type Token = {
  /** the user */
  name: string;
  /** shown this once; edtd keeps only its SHA-256 */
  token: string;
  id: TokenId;
  /** unix seconds; 0: never */
  expires_at: number;
};

export type TokenInfo = {
  id: TokenId;
  user: string;
  description: string;
  /** unix seconds; 0 for a token made before edtd recorded it */
  created_at: number;
  /** unix seconds; 0: never */
  expires_at: number;
  /** an expired token is refused (401) and listed until revoked */
  expired: boolean;
};

export type TokenList = {
  tokens: TokenInfo[];
};

// The limits of the schemas that have any, as the document writes them.
export const contract = {
  "RequestLimits": {
    "bytes": {
      "maximum": 1048576
    }
  },
  "ClusterName": {
    "minLength": 1,
    "maxLength": 40,
    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
  },
  "ResourceName": {
    "minLength": 1,
    "maxLength": 63,
    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
  },
  "Framework": {
    "values": [
      "horovod",
      "deepspeed",
      "megatron",
      "slurm"
    ],
    "labels": {
      "horovod": "Horovod",
      "deepspeed": "DeepSpeed",
      "megatron": "Megatron-LM",
      "slurm": "Slurm"
    }
  },
  "ContainerCount": {
    "minimum": 2,
    "maximum": 64
  },
  "GpuCount": {
    "minimum": 0,
    "maximum": 16
  },
  "ParallelSize": {
    "minimum": 1,
    "maximum": 1024
  },
  "MemoryLimit": {
    "bytes": {
      "minimum": 134217728,
      "maximum": 17592186044416,
      "headroom": 67108864
    }
  },
  "CpuLimit": {
    "millicpus": {
      "minimum": 10,
      "maximum": 1024000
    }
  },
  "ShmSize": {
    "bytes": {
      "minimum": 1048576,
      "maximum": 274877906944,
      "default": 67108864
    },
    "sizeUnits": {
      "": 1,
      "b": 1,
      "k": 1024,
      "kb": 1024,
      "ki": 1024,
      "kib": 1024,
      "m": 1048576,
      "mb": 1048576,
      "mi": 1048576,
      "mib": 1048576,
      "g": 1073741824,
      "gb": 1073741824,
      "gi": 1073741824,
      "gib": 1073741824,
      "t": 1099511627776,
      "tb": 1099511627776,
      "ti": 1099511627776,
      "tib": 1099511627776
    }
  },
  "DrainTimeout": {
    "durationMs": {
      "minimum": 0,
      "maximum": 3600000,
      "default": 60000
    },
    "durationUnits": {
      "ms": 1,
      "s": 1000,
      "": 1000,
      "m": 60000,
      "min": 60000,
      "h": 3600000
    }
  },
  "MountPath": {
    "maxLength": 4095,
    "pattern": "^/[^\\u0000-\\u001f\\u007f]*$",
    "systemDirectories": [
      "/bin",
      "/boot",
      "/dev",
      "/etc",
      "/job",
      "/lib",
      "/lib32",
      "/lib64",
      "/proc",
      "/run",
      "/sbin",
      "/sys",
      "/tmp",
      "/usr",
      "/var"
    ]
  },
  "Env": {
    "keyPattern": "^[A-Za-z_][A-Za-z0-9_]*$"
  },
  "EnvValue": {
    "maxLength": 4096,
    "pattern": "^[^\\u0000-\\u001f\\u007f\\u0022\\u005c]*$"
  },
  "Priority": {
    "minimum": 0,
    "maximum": 100
  },
  "ClusterPhase": {
    "values": [
      "Pending",
      "Creating",
      "Running",
      "Scaling",
      "Failed",
      "Deleting"
    ]
  },
  "ContainerPhase": {
    "values": [
      "Pending",
      "Creating",
      "Running",
      "Draining",
      "Stopping",
      "Failed"
    ]
  },
  "EventType": {
    "values": [
      "Created",
      "Scaling",
      "Running",
      "Failed",
      "Restarted",
      "Deleting",
      "Drained",
      "DrainTimedOut",
      "Queued",
      "Scheduled"
    ]
  },
  "JobState": {
    "values": [
      "Running",
      "Succeeded",
      "Failed"
    ]
  },
  "JobDirectory": {
    "maxLength": 1024,
    "pattern": "^/"
  },
  "VolumeFilePath": {
    "minLength": 1,
    "maxLength": 1024
  },
  "VolumeFileUpload": {
    "bytes": {
      "maximum": 33554432
    }
  },
  "QuotaCount": {
    "minimum": 0,
    "maximum": 65536
  },
  "TokenLifetime": {
    "durationMs": {
      "minimum": 1000,
      "maximum": 31536000000
    },
    "durationUnits": {
      "": 1000,
      "s": 1000,
      "m": 60000,
      "h": 3600000,
      "d": 86400000
    }
  },
  "TokenDescription": {
    "maxLength": 200
  },
  "TokenId": {
    "minimum": 1
  }
} as const;
