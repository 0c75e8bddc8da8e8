// The `strata` command line: MPI start-up, subcommands, and the one place that turns errors
// into a message and an exit code. An error every rank agreed on ends the job normally; an error
// on one rank mid-run aborts the whole job (MPI_Abort) so no peer is left waiting.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/exit_codes.hpp"
#include "core/stop_signals.hpp"
#include "cli/calibrate_command.hpp"
#include "cli/checkpoint_commands.hpp"
#include "cli/sample_command.hpp"
#include "cli/models_command.hpp"
#include "cli/option_table.hpp"
#include "cli/plan_command.hpp"
#include "cli/simulate_command.hpp"
#include "cli/thread_wait_startup.hpp"
#include "cli/train_command.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "core/error.hpp"
#include "core/large_allocations.hpp"

namespace {

// Flags that were renamed: their old spelling gets a sentence naming the new one.
void hint_renamed_flags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, 2) != "--") continue;
    const std::string_view name = arg.substr(2, arg.find('=') == std::string_view::npos ? std::string_view::npos
                                                                                          : arg.find('=') - 2);
    const std::string renamed = strata::renamed_option(name);
    if (!renamed.empty()) fmt::print(stderr, "strata: --{} was renamed --{}\n", name, renamed);
  }
}

// The vector instruction set this build was compiled for (STRATA_NATIVE: the build machine's).
// The kernels' reductions run as wide as it allows, so results are bit-identical between builds
// of the same set only: the golden test keys its record by this name.
constexpr const char* kBuildVectorIsa =
#if defined(__AVX512F__)
    "avx512";
#elif defined(__AVX2__)
    "avx2";
#else
    "baseline";
#endif

}  // namespace

int main(int argc, char** argv) {
  strata::settle_thread_wait(argc, argv);  // may start this program again: first of all
  strata::route_stop_signals_to_a_watcher();  // before MPI, OpenMP or oneDNN make a thread
  strata::map_large_allocations();  // the footprint follows the schedule's buffers
  strata::MpiRuntime mpi(&argc, &argv);
  const bool root = strata::MpiRuntime::world_rank() == 0;
  CLI::App app{"strata: sharded data-parallel training of GPT models, partitioned along the machine's "
               "bandwidth hierarchy.\nRun 'strata <command> --help' for a command's flags; launch with "
               "mpirun -np N for N data-parallel ranks."};
  app.set_version_flag("--version", fmt::format("strata 0.1.0 ({} build)", kBuildVectorIsa));
  app.require_subcommand(1);
  strata::add_train_command(app);
  strata::add_models_command(app);
  strata::add_simulate_command(app);
  strata::add_plan_command(app);
  strata::add_calibrate_command(app);
  strata::add_checkpoint_commands(app);
  strata::add_sample_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream quiet;
    const int code = root ? app.exit(e) : app.exit(e, quiet, quiet);  // every rank parsed the same flags
    if (root && code != 0) hint_renamed_flags(argc, argv);
    // --help and --version succeed; every bad command line is the one documented usage code.
    return code == 0 ? strata::kExitOk : strata::kExitUsage;
  } catch (const strata::AgreedExit& e) {
    return e.code;
  } catch (const std::exception& e) {
    strata::MpiRuntime::abort(e.what(), strata::kExitFailure);
  }
  return strata::kExitOk;
}
