#include "common/termination.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace granary {

std::stop_source stopOnTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::stop_source stop;
  std::thread([signals, stop]() mutable {
    int signal = 0;
    sigwait(&signals, &signal);
    stop.request_stop();
  }).detach();
  return stop;
}

}  // namespace granary
