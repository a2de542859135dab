import enum
from typing import Any

class Property(str):
    def __call__(self, *value: Any) -> str | tuple[str, Any]: ...

supported_properties: Property
available_devices: Property
range_for_async_infer_requests: Property
enable_profiling: Property
inference_num_threads: Property
cache_dir: Property
model_name: Property
optimal_number_of_infer_requests: Property
execution_devices: Property
loaded_from_cache: Property
max_requests_in_flight: Property
auto_batch_max_size: Property
disable_transformations: Property
exclusive_async_requests: Property

class PerformanceMode(str, enum.Enum):
    LATENCY = "LATENCY"
    THROUGHPUT = "THROUGHPUT"

class _Hint:
    performance_mode: Property
    num_requests: Property
    inference_precision: Property
    PerformanceMode: type[PerformanceMode]

class _Streams:
    num: Property

class _Device:
    id: Property
    full_name: Property
    capabilities: Property

hint: _Hint
streams: _Streams
device: _Device
