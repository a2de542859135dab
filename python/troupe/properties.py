"""Property names as OpenVINO's ``openvino.properties`` spells them.

Each property is a callable: ``enable_profiling()`` is the name ("PERF_COUNT"),
``enable_profiling(True)`` the pair ("PERF_COUNT", True), so both of these work::

    core.compile_model(model, "CPU", {properties.enable_profiling(): True})
    core.compile_model(model, "CPU", dict([properties.enable_profiling(True)]))
"""
import enum as _enum

from ._troupe import _property_names as _names


class Property(str):
    """A property name (a str) that also builds (name, value) pairs when called with a value."""

    def __call__(self, *value):
        if not value:
            return str(self)
        if len(value) != 1:
            raise TypeError(f"property {self!s} takes one value, got {len(value)}")
        return (str(self), value[0])


def _p(key):
    return Property(_names[key])


supported_properties = _p("supported_properties")
available_devices = _p("available_devices")
range_for_async_infer_requests = _p("range_for_async_infer_requests")
enable_profiling = _p("enable_profiling")
inference_num_threads = _p("inference_num_threads")
cache_dir = _p("cache_dir")
model_name = _p("model_name")
optimal_number_of_infer_requests = _p("optimal_number_of_infer_requests")
execution_devices = _p("execution_devices")
loaded_from_cache = _p("loaded_from_cache")
max_requests_in_flight = _p("max_requests_in_flight")
auto_batch_max_size = _p("auto_batch_max_size")
disable_transformations = _p("disable_transformations")
exclusive_async_requests = _p("exclusive_async_requests")


class _Namespace:
    def __init__(self, **members):
        self.__dict__.update(members)


class PerformanceMode(str, _enum.Enum):
    """Values of hint.performance_mode."""
    LATENCY = "LATENCY"
    THROUGHPUT = "THROUGHPUT"


hint = _Namespace(performance_mode=_p("performance_mode"), num_requests=_p("num_requests"),
                  inference_precision=_p("inference_precision"), PerformanceMode=PerformanceMode)
streams = _Namespace(num=_p("num_streams"))
device = _Namespace(id=_p("device_id"), full_name=_p("device_full_name"),
                    capabilities=_p("device_capabilities"))

__all__ = [n for n in dir() if not n.startswith("_") and n != "enum"]
