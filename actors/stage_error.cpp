#include <new>
#include <string>

#include "actors/stage.hpp"
#include "troupe/pipeline_counters.hpp"

namespace troupe::actors {

std::exception_ptr stage_error(detail::Stage stage, std::exception_ptr error) {
  const std::string where =
      std::string(PipelineCounters::stage_names[static_cast<size_t>(stage)]) + " stage: ";
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return error;
  } catch (const std::bad_alloc&) {
    return std::make_exception_ptr(ExecutionError(where + "out of memory (std::bad_alloc)"));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(ExecutionError(where + e.what()));
  } catch (...) {
    return std::make_exception_ptr(ExecutionError(where + "an exception of unknown type"));
  }
}

}  // namespace troupe::actors
