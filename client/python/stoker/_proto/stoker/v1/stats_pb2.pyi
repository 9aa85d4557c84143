from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DaemonStats(_message.Message):
    __slots__ = ["datasets", "errors", "helpers", "labels", "latency_bounds_seconds", "memory", "open_streams", "placing_remote", "pool", "staging", "storage", "streams", "transport_values", "uptime_seconds"]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    HELPERS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_BOUNDS_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OPEN_STREAMS_FIELD_NUMBER: _ClassVar[int]
    PLACING_REMOTE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    STAGING_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_VALUES_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[DatasetHealth]
    errors: _containers.RepeatedCompositeFieldContainer[ErrorCount]
    helpers: _containers.RepeatedCompositeFieldContainer[HelperStats]
    labels: _containers.RepeatedCompositeFieldContainer[LabelStats]
    latency_bounds_seconds: _containers.RepeatedScalarFieldContainer[float]
    memory: MemoryStats
    open_streams: int
    placing_remote: bool
    pool: WorkerPoolStats
    staging: _containers.RepeatedCompositeFieldContainer[StagingStats]
    storage: _containers.RepeatedCompositeFieldContainer[StorageStats]
    streams: _containers.RepeatedCompositeFieldContainer[StreamStats]
    transport_values: _containers.RepeatedCompositeFieldContainer[NamedValue]
    uptime_seconds: float
    def __init__(self, uptime_seconds: _Optional[float] = ..., open_streams: _Optional[int] = ..., streams: _Optional[_Iterable[_Union[StreamStats, _Mapping]]] = ..., labels: _Optional[_Iterable[_Union[LabelStats, _Mapping]]] = ..., pool: _Optional[_Union[WorkerPoolStats, _Mapping]] = ..., memory: _Optional[_Union[MemoryStats, _Mapping]] = ..., storage: _Optional[_Iterable[_Union[StorageStats, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[ErrorCount, _Mapping]]] = ..., latency_bounds_seconds: _Optional[_Iterable[float]] = ..., datasets: _Optional[_Iterable[_Union[DatasetHealth, _Mapping]]] = ..., helpers: _Optional[_Iterable[_Union[HelperStats, _Mapping]]] = ..., placing_remote: bool = ..., transport_values: _Optional[_Iterable[_Union[NamedValue, _Mapping]]] = ..., staging: _Optional[_Iterable[_Union[StagingStats, _Mapping]]] = ...) -> None: ...

class DatasetHealth(_message.Message):
    __slots__ = ["damage", "dataset", "healthy"]
    DAMAGE_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    damage: _containers.RepeatedCompositeFieldContainer[ShardDamage]
    dataset: str
    healthy: bool
    def __init__(self, dataset: _Optional[str] = ..., healthy: bool = ..., damage: _Optional[_Iterable[_Union[ShardDamage, _Mapping]]] = ...) -> None: ...

class ErrorCount(_message.Message):
    __slots__ = ["code", "count"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    code: str
    count: int
    def __init__(self, code: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class HelperStats(_message.Message):
    __slots__ = ["address", "allowance", "batches", "chunks", "copy_seconds", "failures", "last_error", "late", "open_chunks", "payload_bytes", "rebuilt", "samples", "up", "wait_seconds", "wire_bytes"]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ALLOWANCE_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    COPY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    OPEN_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    REBUILT_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WIRE_BYTES_FIELD_NUMBER: _ClassVar[int]
    address: str
    allowance: float
    batches: int
    chunks: int
    copy_seconds: float
    failures: int
    last_error: str
    late: int
    open_chunks: int
    payload_bytes: int
    rebuilt: int
    samples: int
    up: bool
    wait_seconds: float
    wire_bytes: int
    def __init__(self, address: _Optional[str] = ..., up: bool = ..., open_chunks: _Optional[int] = ..., chunks: _Optional[int] = ..., batches: _Optional[int] = ..., samples: _Optional[int] = ..., failures: _Optional[int] = ..., rebuilt: _Optional[int] = ..., wire_bytes: _Optional[int] = ..., payload_bytes: _Optional[int] = ..., wait_seconds: _Optional[float] = ..., copy_seconds: _Optional[float] = ..., last_error: _Optional[str] = ..., late: _Optional[int] = ..., allowance: _Optional[float] = ...) -> None: ...

class LabelStats(_message.Message):
    __slots__ = ["acks", "batches", "busy_seconds", "bytes", "counts", "dataset", "job_id", "pipeline", "samples", "shared_batches", "skipped", "stages", "transport", "wait_seconds"]
    class CountsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ACKS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    BUSY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SHARED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    acks: int
    batches: int
    busy_seconds: float
    bytes: int
    counts: _containers.ScalarMap[str, float]
    dataset: str
    job_id: str
    pipeline: str
    samples: int
    shared_batches: int
    skipped: int
    stages: _containers.RepeatedCompositeFieldContainer[StageLatency]
    transport: str
    wait_seconds: float
    def __init__(self, dataset: _Optional[str] = ..., pipeline: _Optional[str] = ..., job_id: _Optional[str] = ..., transport: _Optional[str] = ..., samples: _Optional[int] = ..., batches: _Optional[int] = ..., bytes: _Optional[int] = ..., skipped: _Optional[int] = ..., acks: _Optional[int] = ..., wait_seconds: _Optional[float] = ..., busy_seconds: _Optional[float] = ..., stages: _Optional[_Iterable[_Union[StageLatency, _Mapping]]] = ..., shared_batches: _Optional[int] = ..., counts: _Optional[_Mapping[str, float]] = ...) -> None: ...

class MemoryStats(_message.Message):
    __slots__ = ["budget_bytes", "high_water_bytes", "jobs", "reserved_bytes", "shared_runs"]
    BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATER_BYTES_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    RESERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHARED_RUNS_FIELD_NUMBER: _ClassVar[int]
    budget_bytes: int
    high_water_bytes: int
    jobs: int
    reserved_bytes: int
    shared_runs: int
    def __init__(self, reserved_bytes: _Optional[int] = ..., budget_bytes: _Optional[int] = ..., high_water_bytes: _Optional[int] = ..., jobs: _Optional[int] = ..., shared_runs: _Optional[int] = ...) -> None: ...

class NamedValue(_message.Message):
    __slots__ = ["labels", "metric", "value"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LABELS_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.ScalarMap[str, str]
    metric: str
    value: float
    def __init__(self, metric: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., value: _Optional[float] = ...) -> None: ...

class ShardDamage(_message.Message):
    __slots__ = ["file", "reason"]
    FILE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    file: str
    reason: str
    def __init__(self, file: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class StageLatency(_message.Message):
    __slots__ = ["bucket_counts", "count", "stage", "sum_seconds"]
    BUCKET_COUNTS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SUM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    bucket_counts: _containers.RepeatedScalarFieldContainer[int]
    count: int
    stage: str
    sum_seconds: float
    def __init__(self, stage: _Optional[str] = ..., count: _Optional[int] = ..., sum_seconds: _Optional[float] = ..., bucket_counts: _Optional[_Iterable[int]] = ...) -> None: ...

class StagingStats(_message.Message):
    __slots__ = ["bytes_done", "bytes_fetched", "bytes_total", "dataset", "error", "eta_seconds", "rate", "remote_records", "retries", "servable", "shards_done", "shards_total", "source", "state"]
    BYTES_DONE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FETCHED_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_RECORDS_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    SERVABLE_FIELD_NUMBER: _ClassVar[int]
    SHARDS_DONE_FIELD_NUMBER: _ClassVar[int]
    SHARDS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    bytes_done: int
    bytes_fetched: int
    bytes_total: int
    dataset: str
    error: str
    eta_seconds: float
    rate: float
    remote_records: int
    retries: int
    servable: bool
    shards_done: int
    shards_total: int
    source: str
    state: str
    def __init__(self, dataset: _Optional[str] = ..., source: _Optional[str] = ..., state: _Optional[str] = ..., servable: bool = ..., bytes_total: _Optional[int] = ..., bytes_done: _Optional[int] = ..., bytes_fetched: _Optional[int] = ..., shards_total: _Optional[int] = ..., shards_done: _Optional[int] = ..., rate: _Optional[float] = ..., eta_seconds: _Optional[float] = ..., retries: _Optional[int] = ..., remote_records: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class StorageStats(_message.Message):
    __slots__ = ["advice", "dataset", "device", "fstype", "kind", "path"]
    ADVICE_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    FSTYPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    advice: str
    dataset: str
    device: str
    fstype: str
    kind: str
    path: str
    def __init__(self, dataset: _Optional[str] = ..., path: _Optional[str] = ..., fstype: _Optional[str] = ..., kind: _Optional[str] = ..., device: _Optional[str] = ..., advice: _Optional[str] = ...) -> None: ...

class StreamStats(_message.Message):
    __slots__ = ["acks", "batch_size", "batches", "building", "busy_seconds", "bytes", "counts", "dataset", "id", "job_id", "pipeline", "prefetch", "queued", "rank", "samples", "shared_batches", "sharing", "skipped", "steps_per_epoch", "transport", "wait_seconds", "world_size"]
    class CountsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ACKS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BUILDING_FIELD_NUMBER: _ClassVar[int]
    BUSY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SHARED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    SHARING_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    acks: int
    batch_size: int
    batches: int
    building: int
    busy_seconds: float
    bytes: int
    counts: _containers.ScalarMap[str, float]
    dataset: str
    id: int
    job_id: str
    pipeline: str
    prefetch: int
    queued: int
    rank: int
    samples: int
    shared_batches: int
    sharing: bool
    skipped: int
    steps_per_epoch: int
    transport: str
    wait_seconds: float
    world_size: int
    def __init__(self, id: _Optional[int] = ..., dataset: _Optional[str] = ..., pipeline: _Optional[str] = ..., job_id: _Optional[str] = ..., transport: _Optional[str] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., batch_size: _Optional[int] = ..., prefetch: _Optional[int] = ..., steps_per_epoch: _Optional[int] = ..., samples: _Optional[int] = ..., batches: _Optional[int] = ..., bytes: _Optional[int] = ..., skipped: _Optional[int] = ..., acks: _Optional[int] = ..., wait_seconds: _Optional[float] = ..., busy_seconds: _Optional[float] = ..., queued: _Optional[int] = ..., building: _Optional[int] = ..., shared_batches: _Optional[int] = ..., sharing: bool = ..., counts: _Optional[_Mapping[str, float]] = ...) -> None: ...

class WorkerPoolStats(_message.Message):
    __slots__ = ["busy_ns", "queued", "tasks_run", "threads"]
    BUSY_NS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TASKS_RUN_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    busy_ns: int
    queued: int
    tasks_run: int
    threads: int
    def __init__(self, threads: _Optional[int] = ..., busy_ns: _Optional[int] = ..., tasks_run: _Optional[int] = ..., queued: _Optional[int] = ...) -> None: ...
