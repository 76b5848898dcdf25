module nodemaintenance.local/hack/tools/cert-manager

go 1.26.0

// Not built: cert-manager's controllers are nested modules the Go module proxy does not serve. Its CRDs
// (deploy/crds) judge the Helm chart's Issuer and Certificate.
require github.com/cert-manager/cert-manager v1.21.2
