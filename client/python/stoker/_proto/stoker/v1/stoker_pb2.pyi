from . import local_transports_pb2 as _local_transports_pb2
from . import stats_pb2 as _stats_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

from .local_transports_pb2 import CudaIpcRing as CudaIpcRing
from .local_transports_pb2 import NoticeSocket as NoticeSocket
from .local_transports_pb2 import ShmRing as ShmRing
from .local_transports_pb2 import CudaHandleKind as CudaHandleKind
from .local_transports_pb2 import NoticeFrame as NoticeFrame
from .stats_pb2 import GetStatsRequest as GetStatsRequest
from .stats_pb2 import StageLatency as StageLatency
from .stats_pb2 import StreamStats as StreamStats
from .stats_pb2 import LabelStats as LabelStats
from .stats_pb2 import WorkerPoolStats as WorkerPoolStats
from .stats_pb2 import MemoryStats as MemoryStats
from .stats_pb2 import StorageStats as StorageStats
from .stats_pb2 import ErrorCount as ErrorCount
from .stats_pb2 import DaemonStats as DaemonStats
from .stats_pb2 import StagingStats as StagingStats
from .stats_pb2 import NamedValue as NamedValue
from .stats_pb2 import HelperStats as HelperStats
from .stats_pb2 import DatasetHealth as DatasetHealth
from .stats_pb2 import ShardDamage as ShardDamage
COMPRESSION_AUTO: Compression
COMPRESSION_NONE: Compression
COMPRESSION_ZSTD: Compression
CUDA_HANDLE_LEGACY_IPC: _local_transports_pb2.CudaHandleKind
CUDA_HANDLE_UNSPECIFIED: _local_transports_pb2.CudaHandleKind
CUDA_HANDLE_VMM_POSIX_FD: _local_transports_pb2.CudaHandleKind
DESCRIPTOR: _descriptor.FileDescriptor
DTYPE_BOOL: DType
DTYPE_FLOAT16: DType
DTYPE_FLOAT32: DType
DTYPE_FLOAT64: DType
DTYPE_INT16: DType
DTYPE_INT32: DType
DTYPE_INT64: DType
DTYPE_INT8: DType
DTYPE_UINT16: DType
DTYPE_UINT8: DType
DTYPE_UNSPECIFIED: DType
NOTICE_FRAME_MAX_BYTES: _local_transports_pb2.NoticeFrame
NOTICE_FRAME_UNSPECIFIED: _local_transports_pb2.NoticeFrame
TRANSPORT_CUDA_IPC: Transport
TRANSPORT_GRPC: Transport
TRANSPORT_SHM: Transport
TRANSPORT_UNSPECIFIED: Transport

class Ack(_message.Message):
    __slots__ = ["busy_seconds", "position", "wait_seconds"]
    BUSY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    busy_seconds: float
    position: Position
    wait_seconds: float
    def __init__(self, position: _Optional[_Union[Position, _Mapping]] = ..., wait_seconds: _Optional[float] = ..., busy_seconds: _Optional[float] = ...) -> None: ...

class AckList(_message.Message):
    __slots__ = ["acks"]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[Ack]
    def __init__(self, acks: _Optional[_Iterable[_Union[Ack, _Mapping]]] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ["compression", "decoded_bytes", "epoch", "in_shared_ring", "payload", "sample_ids", "sample_reps", "shared", "skipped_ids", "skipped_reps", "slot", "step", "tensors"]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    DECODED_BYTES_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SHARED_RING_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_IDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_REPS_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_IDS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_REPS_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    compression: Compression
    decoded_bytes: int
    epoch: int
    in_shared_ring: bool
    payload: bytes
    sample_ids: _containers.RepeatedScalarFieldContainer[int]
    sample_reps: _containers.RepeatedScalarFieldContainer[int]
    shared: bool
    skipped_ids: _containers.RepeatedScalarFieldContainer[int]
    skipped_reps: _containers.RepeatedScalarFieldContainer[int]
    slot: int
    step: int
    tensors: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    def __init__(self, epoch: _Optional[int] = ..., step: _Optional[int] = ..., sample_ids: _Optional[_Iterable[int]] = ..., skipped_ids: _Optional[_Iterable[int]] = ..., tensors: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., slot: _Optional[int] = ..., shared: bool = ..., in_shared_ring: bool = ..., sample_reps: _Optional[_Iterable[int]] = ..., skipped_reps: _Optional[_Iterable[int]] = ..., compression: _Optional[_Union[Compression, str]] = ..., decoded_bytes: _Optional[int] = ..., payload: _Optional[bytes] = ...) -> None: ...

class DatasetInfo(_message.Message):
    __slots__ = ["bytes", "classes", "content_digest", "fields", "manifest_digest", "name", "num_samples", "num_shards", "staging"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CLASSES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    STAGING_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    classes: _containers.RepeatedScalarFieldContainer[str]
    content_digest: str
    fields: _containers.RepeatedScalarFieldContainer[str]
    manifest_digest: str
    name: str
    num_samples: int
    num_shards: int
    staging: str
    def __init__(self, name: _Optional[str] = ..., num_samples: _Optional[int] = ..., num_shards: _Optional[int] = ..., bytes: _Optional[int] = ..., classes: _Optional[_Iterable[str]] = ..., fields: _Optional[_Iterable[str]] = ..., manifest_digest: _Optional[str] = ..., content_digest: _Optional[str] = ..., staging: _Optional[str] = ...) -> None: ...

class ListDatasetsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListDatasetsResponse(_message.Message):
    __slots__ = ["datasets"]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[DatasetInfo]
    def __init__(self, datasets: _Optional[_Iterable[_Union[DatasetInfo, _Mapping]]] = ...) -> None: ...

class ListPipelinesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListPipelinesResponse(_message.Message):
    __slots__ = ["pipelines"]
    PIPELINES_FIELD_NUMBER: _ClassVar[int]
    pipelines: _containers.RepeatedCompositeFieldContainer[PipelineInfo]
    def __init__(self, pipelines: _Optional[_Iterable[_Union[PipelineInfo, _Mapping]]] = ...) -> None: ...

class OpenStream(_message.Message):
    __slots__ = ["batch_size", "compression", "copy_out", "dataset", "drop_last", "end", "epochs", "gpu_uuid", "hold", "job_id", "map_shared_ring", "notice_socket", "open_timeout", "pipeline", "prefetch", "ra_reps", "rank", "raw", "seed", "share", "start", "transport", "weight", "world_size"]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    COPY_OUT_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DROP_LAST_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MAP_SHARED_RING_FIELD_NUMBER: _ClassVar[int]
    NOTICE_SOCKET_FIELD_NUMBER: _ClassVar[int]
    OPEN_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    RA_REPS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    batch_size: int
    compression: Compression
    copy_out: bool
    dataset: str
    drop_last: bool
    end: Position
    epochs: int
    gpu_uuid: str
    hold: int
    job_id: str
    map_shared_ring: bool
    notice_socket: bool
    open_timeout: float
    pipeline: str
    prefetch: int
    ra_reps: int
    rank: int
    raw: bool
    seed: int
    share: bool
    start: Position
    transport: Transport
    weight: float
    world_size: int
    def __init__(self, dataset: _Optional[str] = ..., pipeline: _Optional[str] = ..., batch_size: _Optional[int] = ..., seed: _Optional[int] = ..., epochs: _Optional[int] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., job_id: _Optional[str] = ..., drop_last: bool = ..., prefetch: _Optional[int] = ..., transport: _Optional[_Union[Transport, str]] = ..., start: _Optional[_Union[Position, _Mapping]] = ..., weight: _Optional[float] = ..., share: bool = ..., gpu_uuid: _Optional[str] = ..., hold: _Optional[int] = ..., open_timeout: _Optional[float] = ..., map_shared_ring: bool = ..., notice_socket: bool = ..., end: _Optional[_Union[Position, _Mapping]] = ..., ra_reps: _Optional[int] = ..., raw: bool = ..., compression: _Optional[_Union[Compression, str]] = ..., copy_out: bool = ...) -> None: ...

class PipelineInfo(_message.Message):
    __slots__ = ["name", "ops", "outputs"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ops: _containers.RepeatedScalarFieldContainer[str]
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    def __init__(self, name: _Optional[str] = ..., ops: _Optional[_Iterable[str]] = ..., outputs: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ...) -> None: ...

class Position(_message.Message):
    __slots__ = ["epoch", "step"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    step: int
    def __init__(self, epoch: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class StreamHeader(_message.Message):
    __slots__ = ["ack_list", "cuda_ipc", "notices", "num_samples", "outputs", "prefetch", "samples_per_epoch", "share_refused", "shared", "shared_ring", "shm", "start", "steps_per_epoch", "transport"]
    ACK_LIST_FIELD_NUMBER: _ClassVar[int]
    CUDA_IPC_FIELD_NUMBER: _ClassVar[int]
    NOTICES_FIELD_NUMBER: _ClassVar[int]
    NUM_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SHARED_RING_FIELD_NUMBER: _ClassVar[int]
    SHARE_REFUSED_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    ack_list: bool
    cuda_ipc: _local_transports_pb2.CudaIpcRing
    notices: _local_transports_pb2.NoticeSocket
    num_samples: int
    outputs: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    prefetch: int
    samples_per_epoch: int
    share_refused: str
    shared: bool
    shared_ring: _local_transports_pb2.ShmRing
    shm: _local_transports_pb2.ShmRing
    start: Position
    steps_per_epoch: int
    transport: Transport
    def __init__(self, num_samples: _Optional[int] = ..., steps_per_epoch: _Optional[int] = ..., samples_per_epoch: _Optional[int] = ..., transport: _Optional[_Union[Transport, str]] = ..., outputs: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., prefetch: _Optional[int] = ..., start: _Optional[_Union[Position, _Mapping]] = ..., shm: _Optional[_Union[_local_transports_pb2.ShmRing, _Mapping]] = ..., shared: bool = ..., shared_ring: _Optional[_Union[_local_transports_pb2.ShmRing, _Mapping]] = ..., ack_list: bool = ..., notices: _Optional[_Union[_local_transports_pb2.NoticeSocket, _Mapping]] = ..., share_refused: _Optional[str] = ..., cuda_ipc: _Optional[_Union[_local_transports_pb2.CudaIpcRing, _Mapping]] = ...) -> None: ...

class StreamRequest(_message.Message):
    __slots__ = ["ack", "acks", "open"]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    acks: AckList
    open: OpenStream
    def __init__(self, open: _Optional[_Union[OpenStream, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., acks: _Optional[_Union[AckList, _Mapping]] = ...) -> None: ...

class StreamResponse(_message.Message):
    __slots__ = ["batch", "header"]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    batch: Batch
    header: StreamHeader
    def __init__(self, header: _Optional[_Union[StreamHeader, _Mapping]] = ..., batch: _Optional[_Union[Batch, _Mapping]] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ["dtype", "length", "name", "offset", "offsets_for", "shape", "utf8"]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FOR_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    UTF8_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    length: int
    name: str
    offset: int
    offsets_for: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    utf8: bool
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ..., offsets_for: _Optional[str] = ..., utf8: bool = ...) -> None: ...

class Transport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
