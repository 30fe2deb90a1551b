void vmpx_libvirt_deny(void);
int vmpx_libvirt_denied(void);
