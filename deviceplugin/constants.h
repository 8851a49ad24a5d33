// Names and default paths of missile-device-plugin that other parts of the project must agree
// with: the Kubernetes manifests under deploy/kubernetes/ (checked by
// deploy/kubernetes/check_manifests.py, which reads this file) and the docs.
// Keep each constant on one line in the form `inline constexpr char kName[] = "value";`.
#ifndef MISSILE_DEVICEPLUGIN_CONSTANTS_H_
#define MISSILE_DEVICEPLUGIN_CONSTANTS_H_

namespace missile::deviceplugin {

// The kubelet device plugin API version this plugin speaks.
inline constexpr char kApiVersion[] = "v1beta1";

// Extended resources, one plugin endpoint each.
inline constexpr char kLsResource[] = "missile.io/ls";
inline constexpr char kBeResource[] = "missile.io/be";
inline constexpr char kLsEndpoint[] = "missile-ls.sock";
inline constexpr char kBeEndpoint[] = "missile-be.sock";

// The kubelet's device plugin directory and its registration socket in it.
inline constexpr char kDefaultKubeletDir[] = "/var/lib/kubelet/device-plugins";
inline constexpr char kKubeletSocketName[] = "kubelet.sock";

// missiled's socket directory, the same path on the host and in tenant containers.
inline constexpr char kDefaultSocketDir[] = "/run/missile";
inline constexpr char kSocketName[] = "missiled.sock";

// The shim bundle: a host directory holding libmissile.so, mounted read-only into tenants.
inline constexpr char kDefaultShimHostDir[] = "/opt/missile/shim";
inline constexpr char kDefaultShimContainerDir[] = "/opt/missile/shim";
inline constexpr char kShimLibrary[] = "libmissile.so";

// Where the GPU device nodes are on the host (tests point this elsewhere).
inline constexpr char kDefaultDeviceRoot[] = "/dev";

// Device health values of the API.
inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_CONSTANTS_H_
