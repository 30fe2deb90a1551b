#!/usr/bin/python3
"""Reads a vmpayload image's extracted tree with cloudbase-init's own code.

Usage: read_payload.py CHECKOUT TREE SERVICE

CHECKOUT is a cloudbase-init source tree (git clone of
github.com/cloudbase/cloudbase-init), TREE the payload image's files as
Windows sees them (extracted by the caller), SERVICE "configdrive"
(cloudbase-init's ConfigDriveService) or "nocloud" (its
NoCloudConfigDriveService). It prints one JSON object: what the service
reads (instance id, host name, public keys, administrator name, password
and certificates, network details v2, user data) and what cloudbase-init's
plugins do with it on Windows, recorded by a stand-in for its Windows OS
layer (the only stub: cloudbaseinit.osutils.windows needs the Win32 API).

It runs cloudbase-init's plugins (SetHostName's host name rule,
NetworkConfigPlugin, UserDataPlugin with its script detection and
cloud-config plugins), which act on the current directory (cloud-config
write_files) and the temporary directory (scripts): run it in a scratch
directory with TMPDIR pointing into it. This file is vmpayload's; it
imports cloudbase-init and copies none of it.
"""

import base64
import json
import os
import sys


def main():
    checkout, tree, service_name = sys.argv[1:4]
    sys.path.insert(0, checkout)

    from cloudbaseinit import conf as cloudbaseinit_conf
    cloudbaseinit_conf.CONF([], project="cloudbase-init")
    from cloudbaseinit.osutils import factory as osutils_factory

    calls = []
    adapters = {}

    class WindowsOS(object):
        """Records what cloudbase-init asks of Windows."""

        def get_network_adapter_name_by_mac_address(self, mac):
            # Windows names adapters "Ethernet", "Ethernet 2", ...
            return adapters.setdefault(
                mac.lower(), "Ethernet %d" % (len(adapters) + 1))

        def execute_powershell_script(self, path, sysnative=True):
            with open(path, "rb") as f:
                body = f.read()
            calls.append({"call": "execute_powershell_script",
                          "sysnative": sysnative,
                          "extension": os.path.splitext(path)[1],
                          "script": base64.b64encode(body).decode()})
            return b"", b"", 0

        def execute_process(self, args, shell=True, decode_output=False):
            rec = {"call": "execute_process", "shell": shell,
                   "args": [os.path.basename(a) if os.path.isfile(a) else a
                            for a in args]}
            for a in args:
                if os.path.isfile(a):
                    rec["extension"] = os.path.splitext(a)[1]
                    with open(a, "rb") as f:
                        rec["script"] = base64.b64encode(f.read()).decode()
            calls.append(rec)
            return b"", b"", 0

        def get_default_script_exec_header(self):
            # what cloudbase-init's WindowsUtils answers (constant
            # SCRIPT_HEADER_CMD): runcmd entries become a batch file
            from cloudbaseinit import constant
            return constant.SCRIPT_HEADER_CMD

        def __getattr__(self, name):
            def record(*args, **kwargs):
                calls.append({"call": name,
                              "args": [a if isinstance(a, (str, int, bool,
                                                           type(None), list))
                                       else repr(a) for a in args]})
                return False
            return record

    winos = WindowsOS()
    osutils_factory.get_os_utils = lambda: winos

    if service_name == "classify":
        classify(tree)
        return
    if service_name == "configdrive":
        from cloudbaseinit.metadata.services import configdrive
        svc = configdrive.ConfigDriveService()
    else:
        from cloudbaseinit.metadata.services import nocloudservice
        svc = nocloudservice.NoCloudConfigDriveService()
    # load() finds the drive by its label through Windows' disk APIs and
    # copies it to a temporary folder; the caller has extracted it.
    svc._metadata_path = tree

    out = {}
    out["instance_id"] = svc.get_instance_id()
    out["host_name"] = svc.get_host_name()
    if out["host_name"]:
        from cloudbaseinit.utils import hostname
        out["computer_name"] = hostname.set_hostname(
            winos, out["host_name"])[0]
    out["public_keys"] = sorted(svc.get_public_keys() or [])
    out["admin_username"] = svc.get_admin_username()
    out["admin_password"] = svc.get_admin_password()
    out["certs"] = sorted(svc.get_client_auth_certs() or [])

    nd = svc.get_network_details_v2()
    if nd:
        out["network"] = {
            "links": [{"id": l.id, "name": l.name, "type": l.type,
                       "mac": l.mac_address, "mtu": l.mtu}
                      for l in nd.links],
            "networks": [{"link": n.link, "address_cidr": n.address_cidr,
                          "dns": n.dns_nameservers,
                          "routes": [{"network_cidr": r.network_cidr,
                                      "gateway": r.gateway}
                                     for r in n.routes]}
                         for n in nd.networks],
            "services": [{"addresses": s.addresses} for s in nd.services],
        }
        from cloudbaseinit.plugins.common import networkconfig
        del calls[:]
        networkconfig.NetworkConfigPlugin().execute(svc, {})
        out["network_calls"] = list(calls)

    from cloudbaseinit.metadata.services import base as services_base
    try:
        ud = svc.get_decoded_user_data()
    except services_base.NotExistingMetadataException:
        ud = None
    out["user_data"] = None if ud is None else base64.b64encode(ud).decode()
    if ud:
        from cloudbaseinit.plugins.common import userdatautils
        cmd = userdatautils.get_command(ud)
        out["script_executor"] = type(cmd).__name__ if cmd else None
        if ud.startswith(b"#cloud-config"):
            from cloudbaseinit.plugins.common.userdataplugins import (
                cloudconfig)
            ex = cloudconfig.CloudConfigPluginExecutor.from_yaml(ud)
            out["cloud_config_plugins"] = [n for n, _ in ex._expected_plugins]
        from cloudbaseinit.plugins.common import userdata
        del calls[:]
        out["user_data_result"] = list(
            userdata.UserDataPlugin().execute(svc, {}))
        out["user_data_calls"] = list(calls)
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=repr)


def classify(tree):
    """Says which way cloudbase-init's UserDataPlugin takes each user-data.

    Reads a JSON list of base64 user-data texts from stdin and prints, for
    each, the branch the plugin's own _process_user_data takes: "multipart",
    "template" (then the rendered text's branch), "cloud-config", the class
    of the script executor userdatautils.get_command finds, "unsupported"
    (no executor: it logs "Unsupported user_data format") or "x509" (its
    PEM certificate branch, the only one that runs nothing). The branches
    are observed by wrapping the functions each one calls; nothing runs.
    """
    from cloudbaseinit.metadata.services import configdrive
    from cloudbaseinit.plugins.common import userdata
    from cloudbaseinit.plugins.common import userdatautils
    from cloudbaseinit.plugins.common.userdataplugins import cloudconfig

    svc = configdrive.ConfigDriveService()
    svc._metadata_path = tree
    path = []

    def run_script(data):
        cmd = userdatautils.get_command(data)
        path.append(type(cmd).__name__ if cmd else "unsupported")
        return 0
    userdatautils.execute_user_data_script = run_script

    def cloud_config(self, data):
        path.append("cloud-config")
    cloudconfig.CloudConfigPlugin.process_non_multipart = cloud_config

    def part(self, part, plugins, handlers):
        if "multipart" not in path:
            path.append("multipart")
        return 1, False
    userdata.UserDataPlugin._process_part = part

    find_engine = userdata.template_factory.get_template_engine

    def engine(data):
        e = find_engine(data)
        if e:
            path.append("template")
        return e
    userdata.template_factory.get_template_engine = engine

    out = []
    for b in json.load(sys.stdin):
        del path[:]
        userdata.UserDataPlugin()._process_user_data(
            base64.b64decode(b), svc)
        out.append(path[:] or ["x509"])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
