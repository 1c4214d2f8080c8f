package nodeimage

// cniManifest deploys the kindnetd stand-in and, beside it in each node's
// Pod, the NetworkPolicy engine (netpol: upstream kube-network-policies,
// as kind's kindnetd embeds it). kind reads it from
// /kind/manifests/default-cni.yaml; the two "would you kindly" lines are
// kind's markers for filling in the pod subnet and the control-plane endpoint.
//
// The engine queues to userspace only the new connections of Pods some
// NetworkPolicy selects (an nftables set of their addresses); it learns a
// local Pod's address from the runtime over NRI (containerd's socket in
// /var/run/nri) as the sandbox starts, so a policy holds from a Pod's
// first packet. Its metrics stay on the node's loopback.
const cniManifest = `# skewer's stand-in for kindnetd
# would you kindly template this file
# would you kindly patch this file
---
kind: ClusterRole
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: kindnet
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods, namespaces]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
---
kind: ClusterRoleBinding
apiVersion: rbac.authorization.k8s.io/v1
metadata:
  name: kindnet
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kindnet
subjects:
- kind: ServiceAccount
  name: kindnet
  namespace: kube-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: kindnet
  namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kindnet
  namespace: kube-system
  labels:
    app: kindnet
    k8s-app: kindnet
spec:
  selector:
    matchLabels:
      app: kindnet
  template:
    metadata:
      labels:
        app: kindnet
        k8s-app: kindnet
    spec:
      hostNetwork: true
      tolerations:
      - operator: Exists
      priorityClassName: system-node-critical
      serviceAccountName: kindnet
      containers:
      - name: kindnet-cni
        image: CNI_IMAGE
        command: [/usr/local/bin/kindnetd]
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: HOST_IP
          valueFrom:
            fieldRef:
              fieldPath: status.hostIP
        - name: POD_SUBNET
          value: "{{ .PodSubnet }}"
        volumeMounts:
        - name: cni-cfg
          mountPath: /etc/cni/net.d
        - name: xtables-lock
          mountPath: /run/xtables.lock
        resources:
          requests:
            cpu: 50m
            memory: 30Mi
        securityContext:
          privileged: false
          capabilities:
            add: ["NET_RAW", "NET_ADMIN"]
      - name: kube-network-policies
        image: CNI_IMAGE
        command: [/usr/local/bin/netpol, --hostname-override=$(NODE_NAME), --nfqueue-id=98,
          --metrics-bind-address=127.0.0.1:9080, --v=2]
        env:
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        volumeMounts:
        - name: nri-plugin
          mountPath: /var/run/nri
        - name: netns
          mountPath: /var/run/netns
          mountPropagation: HostToContainer
        resources:
          requests:
            cpu: 10m
            memory: 30Mi
        securityContext:
          privileged: true
      volumes:
      - name: nri-plugin
        hostPath:
          path: /var/run/nri
      - name: netns
        hostPath:
          path: /var/run/netns
      - name: cni-cfg
        hostPath:
          path: /etc/cni/net.d
          type: DirectoryOrCreate
      - name: xtables-lock
        hostPath:
          path: /run/xtables.lock
          type: FileOrCreate
`
