"""A real local Kubernetes control plane (etcd, kube-apiserver, controllers, scheduler, KWOK) for tests and the demo."""
