// Transport selection and the verbs probe. Verbs code is compiled only with TG_HAVE_VERBS (binding.gyp sets it
// when <infiniband/verbs.h> exists); at run time it is chosen only when ibv_get_device_list reports a device.
#include <cstdlib>
#include <string>

#include "transport.h"
#ifdef TG_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

namespace tg {
#ifdef TG_HAVE_VERBS
std::unique_ptr<Transport> makeVerbsTransport(ibv_device* dev, std::string& error);
#endif

VerbsProbe probeVerbs() {
  VerbsProbe p;
#ifdef TG_HAVE_VERBS
  p.compiled = true;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    p.detail = "ibv_get_device_list failed (no RDMA subsystem)";
    return p;
  }
  p.devices = n;
  p.detail = n == 0 ? "no RDMA device found" : std::string("first device ") + ibv_get_device_name(list[0]);
  ibv_free_device_list(list);
#else
  p.detail = "built without libibverbs headers";
#endif
  return p;
}

namespace {
// Opens the verbs transport on TIDEGATE_VERBS_DEVICE, or on the first device; nullptr and `why` when it cannot.
std::unique_ptr<Transport> openVerbs(std::string& why) {
#ifdef TG_HAVE_VERBS
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    why = "compiled in; no RDMA device found";
    return nullptr;
  }
  const char* wanted = std::getenv("TIDEGATE_VERBS_DEVICE");
  ibv_device* dev = nullptr;
  for (int i = 0; i < n && dev == nullptr; i++)
    if (wanted == nullptr || *wanted == '\0' || std::string(ibv_get_device_name(list[i])) == wanted) dev = list[i];
  std::unique_ptr<Transport> t;
  if (dev == nullptr) why = std::string("no RDMA device named ") + wanted + " (TIDEGATE_VERBS_DEVICE)";
  else t = makeVerbsTransport(dev, why);
  ibv_free_device_list(list);
  return t;
#else
  why = "built without libibverbs headers";
  return nullptr;
#endif
}
}  // namespace

std::unique_ptr<Transport> makeTransport(const std::string& preferred, std::string& fallback, std::string& error) {
  fallback.clear();
  error.clear();
  if (preferred == "tcp") return makeTcpTransport();
  std::string why;
  std::unique_ptr<Transport> t = openVerbs(why);
  if (t) return t;
  if (preferred == "verbs") {
    error = "the verbs transport was asked for but cannot run here: " + why;
    return nullptr;
  }
  fallback = "verbs transport unavailable (" + why + "); using TCP";
  return makeTcpTransport();
}
}  // namespace tg
