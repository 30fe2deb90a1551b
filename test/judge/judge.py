#!/usr/bin/python3
"""Report what the installed (real) cloud-init makes of a payload image.

Usage: /usr/bin/python3 judge.py IMAGE

Prints one JSON document on stdout. Everything cloud-init complains about
goes into the document ("errors", "schema", per-section errors). The exit
status is non-zero only when the judge itself cannot work (missing tools,
cloudinit not importable, internal bugs).

The script only *reads*: it never mounts, never writes outside its own
temporary directory and never fetches #include URLs.
"""

import base64
import copy
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    from cloudinit import handlers, helpers, sources, user_data, util
    from cloudinit.handlers import cloud_config, jinja_template
    from cloudinit.net import network_state
    from cloudinit.sources import DataSourceConfigDrive as ds_configdrive
    from cloudinit.sources import DataSourceNoCloud as ds_nocloud
    from cloudinit.sources.helpers import openstack
    from cloudinit import version as ci_version
except ImportError as exc:  # pragma: no cover - environment problem
    sys.stderr.write(
        "judge: cannot import cloudinit with %s: %s "
        "(install Debian's cloud-init package and run with /usr/bin/python3)\n"
        % (sys.executable, exc)
    )
    sys.exit(3)

# The judge runs on a host, not in the guest: cloud-init's network code asks
# the running system for its NICs by MAC (and fails on a host with two tap
# devices sharing a MAC, e.g. two test guests). The guest's NICs are what the
# judge assumes (net_convert's --mac, or none), so that lookup is replaced
# here and in every net-convert child (NET_CONVERT_SHIM).
def _no_host_nics(*_args, **_kwargs):
    return {}


def _hide_host_nics():
    import cloudinit.net as ci_net

    ci_net.get_interfaces_by_mac = _no_host_nics
    network_state.get_interfaces_by_mac = _no_host_nics


_hide_host_nics()

NET_CONVERT_SHIM = (
    "import sys\n"
    "import cloudinit.net as n\n"
    "from cloudinit.net import network_state as s\n"
    "from cloudinit.cmd.devel import net_convert as c\n"
    "a = c.get_parser().parse_args(sys.argv[1:])\n"
    "m = dict(reversed(x.split(',', 1)) for x in (a.mac or []))\n"
    "n.get_interfaces_by_mac = s.get_interfaces_by_mac = lambda *x, **k: dict(m)\n"
    "c.handle_args(c.NAME, a)\n"
)

REQUIRED_TOOLS = ("blkid", "xorriso", "mcopy", "cloud-init")
NOCLOUD_LABELS = ("cidata", "CIDATA")
CONFIGDRIVE_LABELS = ("config-2", "CONFIG-2")
SEED_FSTYPES = ("iso9660", "vfat")
SCRIPT_TYPES = (
    "text/x-shellscript",
    "text/x-shellscript-per-boot",
    "text/x-shellscript-per-instance",
    "text/x-shellscript-per-once",
    "text/cloud-boothook",
)
INCLUDE_TYPES = ("text/x-include-url", "text/x-include-once-url")
OUTPUT_KINDS = ("eni", "netplan", "networkd")


class LogCollector(logging.Handler):
    """Collects WARNING+ records cloud-init logs while we drive it."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        try:
            self.messages.append(
                "%s: %s" % (record.levelname, record.getMessage())
            )
        except Exception as exc:  # formatting problem in a log call
            self.messages.append("log record unformattable: %s" % exc)

    def take(self):
        out, self.messages = self.messages, []
        return out


def text(data):
    """Bytes -> str (UTF-8, replacement chars); None stays None."""
    if data is None:
        return None
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data


def jsonable(obj):
    """Deep-convert cloud-init values into JSON-encodable ones."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bytes):
        try:
            return obj.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(obj).decode("ascii")
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def need_tools():
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        sys.stderr.write(
            "judge: required tools missing from PATH: %s "
            "(apt-get install util-linux xorriso mtools cloud-init)\n"
            % ", ".join(missing)
        )
        sys.exit(3)


def run(argv, **kw):
    return subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


def probe(image):
    """blkid -p -o export: returns dict of the exported keys."""
    res = run(["blkid", "-p", "-o", "export", image])
    out = {}
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out, res.returncode


def extract(image, fstype, dest, report):
    if fstype == "iso9660":
        argv = [
            "xorriso", "-osirrox", "on", "-indev", image, "-extract", "/", dest
        ]
    else:
        argv = ["mcopy", "-s", "-n", "-i", image, "::*", dest]
    res = run(argv, env=dict(os.environ, MTOOLS_SKIP_CHECK="1"))
    if res.returncode != 0:
        report["errors"].append(
            "extracting %s with %s failed (exit %d): %s"
            % (image, argv[0], res.returncode, text(res.stderr).strip())
        )
        return False
    # xorriso copies ISO permissions (often read-only); make the tree ours.
    for root, dirs, files in os.walk(dest):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return True


def list_files(dest):
    found = []
    for root, _dirs, files in os.walk(dest):
        for f in files:
            found.append(os.path.relpath(os.path.join(root, f), dest))
    return sorted(found)


class _JudgeDS:
    """Just enough of a datasource for helpers.Paths to resolve ipaths."""

    def get_instance_id(self):
        return "judge"


INCLUDE_PREFIX = "http://includes.invalid/"
JINJA_INSTANCE_DATA = {
    "v1": {
        "instance_id": "judge-instance",
        "local_hostname": "judge-host",
        "cloud_name": "judge",
    },
    "ds": {"meta_data": {}},
}
# VMPAYLOAD_JUDGE_NO_SCHEMA=1 skips `cloud-init schema` (one cloud-init
# start-up per cloud-config part) for tests that judge many images.
NO_SCHEMA = os.environ.get("VMPAYLOAD_JUDGE_NO_SCHEMA") == "1"


class NoFetchUserDataProcessor(user_data.UserDataProcessor):
    """cloud-init's UserDataProcessor, but #include URLs are only recorded,
    except those under INCLUDE_PREFIX when VMPAYLOAD_JUDGE_INCLUDES names a
    directory: those are served from that directory and processed as
    cloud-init processes fetched content.

    The image is judged on its own; fetching would make results depend on
    the network (and these machines have none).
    """

    def __init__(self, paths):
        super().__init__(paths)
        self.include_urls = []
        self.include_dir = os.environ.get("VMPAYLOAD_JUDGE_INCLUDES") or None

    def _do_include(self, content, append_msg):
        for line in content.splitlines():
            lc = line.lower()
            if lc.startswith("#include-once"):
                line = line[len("#include-once"):].lstrip()
            elif lc.startswith("#include"):
                line = line[len("#include"):].lstrip()
            if line.startswith("#"):
                continue
            url = line.strip()
            if not url:
                continue
            self.include_urls.append(url)
            if self.include_dir and url.startswith(INCLUDE_PREFIX):
                name = url[len(INCLUDE_PREFIX):]
                path = os.path.join(self.include_dir, name)
                if "/" in name or not os.path.isfile(path):
                    LOG_INC.warning("include %s is not served locally", url)
                    continue
                with open(path, "rb") as fh:
                    self._process_msg(
                        user_data.convert_string(fh.read()), append_msg
                    )


LOG_INC = logging.getLogger("judge.include")


def schema_check(payload, workdir, name):
    path = os.path.join(workdir, name)
    with open(path, "wb") as fh:
        fh.write(payload if isinstance(payload, bytes) else payload.encode())
    res = run(["cloud-init", "schema", "--config-file", path])
    msgs = [
        m.strip()
        for m in (text(res.stdout) + "\n" + text(res.stderr)).splitlines()
        if m.strip()
    ]
    deprecations = [
        m.split(":", 1)[1].strip() if m.startswith("Cloud config schema")
        else m
        for m in msgs
        if "DEPRECATED" in m
    ]
    return {
        "valid": res.returncode == 0,
        "messages": msgs,
        "deprecations": deprecations,
    }


def written_files(cfg, errors):
    """The files cc_write_files would write from a merged cloud-config: each
    entry's content decoded by the module's own extract_contents, as base64."""
    from cloudinit.config import cc_write_files

    out = []
    entries = cfg.get("write_files") if isinstance(cfg, dict) else None
    for i, f in enumerate(entries or []):
        if not isinstance(f, dict) or not f.get("path"):
            continue
        try:
            data = cc_write_files.extract_contents(
                f.get("content", ""),
                cc_write_files.canonicalize_extraction(f.get("encoding")),
            )
        except Exception as exc:
            errors.append("write_files[%d] %s: decoding: %s" % (i, f["path"], exc))
            continue
        if isinstance(data, str):
            data = data.encode("utf-8")
        out.append(
            {
                "path": f["path"],
                "content_b64": base64.b64encode(data).decode("ascii"),
                "defer": bool(f.get("defer")),
            }
        )
    return out


def judge_user_data(raw, workdir, tag, log, schema=True):
    """Process user-data/vendor-data the way cloud-init's stages do."""
    out = {
        "parts": [],
        "merged_cloud_config": None,
        "schema": [],
        "scripts": [],
        "includes": [],
        "unknown": [],
        "jinja": [],
        "errors": [],
    }
    if raw is None:
        return out
    run_dir = os.path.join(workdir, "run-" + tag)
    os.makedirs(run_dir, exist_ok=True)
    paths = helpers.Paths(
        {"cloud_dir": os.path.join(workdir, "cloud-" + tag),
         "run_dir": run_dir},
        ds=_JudgeDS(),
    )
    # Jinja templates render against this fixed instance data (the same
    # for an image and for a raw document, so the two compare).
    with open(paths.get_runpath("instance_data_sensitive"), "w") as fh:
        json.dump(JINJA_INSTANCE_DATA, fh)
    proc = NoFetchUserDataProcessor(paths)
    try:
        msg = proc.process(raw)
    except Exception as exc:
        out["errors"].append("processing %s: %s" % (tag, exc))
        out["errors"].extend(log.take())
        return out
    out["includes"] = proc.include_urls

    cc_handler = cloud_config.CloudConfigPartHandler(paths)
    cc_types = cc_handler.list_types()
    jinja_handler = jinja_template.JinjaTemplatePartHandler(
        paths, sub_handlers=[cc_handler]
    )
    handlers.call_begin(cc_handler, None, None)
    state = {"n": 0}

    def callback(_data, filename, payload, headers):
        ctype = headers["Content-Type"]
        idx = state["n"]
        state["n"] += 1
        ptext = text(payload)
        out["parts"].append(
            {
                "index": idx,
                "filename": filename,
                "content_type": ctype,
                "content": ptext,
                "merge_type": headers.get("Merge-Type")
                or headers.get("X-Merge-Type"),
            }
        )
        if ctype in cc_types:
            handlers.run_part(
                cc_handler, None, filename, payload, None, headers
            )
            if ctype == "text/cloud-config" and schema and not NO_SCHEMA:
                res = schema_check(
                    payload, workdir, "%s-part-%03d.yaml" % (tag, idx)
                )
                res.update({"index": idx, "filename": filename})
                out["schema"].append(res)
        elif ctype in SCRIPT_TYPES:
            out["scripts"].append(
                {"filename": filename, "content_type": ctype,
                 "content": ptext}
            )
        elif ptext:
            out["unknown"].append(
                {"filename": filename, "content_type": ctype,
                 "content": ptext}
            )
            if ctype in handlers.PART_CONTENT_TYPES:
                # Never run user part-handlers; say what cloud-init would do.
                out["errors"].append(
                    "part %s is a part-handler (custom code cloud-init would "
                    "load and run); the judge does not run it" % filename
                )
            elif ctype == "text/jinja2":
                # rendered with JINJA_INSTANCE_DATA; a cloud-config result
                # merges like any cloud-config part
                out["jinja"].append(filename)
                try:
                    handlers.run_part(
                        jinja_handler, None, filename, payload, None, headers
                    )
                except Exception as exc:
                    out["errors"].append(
                        "rendering jinja part %s: %s: %s"
                        % (filename, type(exc).__name__, exc)
                    )
            else:
                # Let cloud-init's own walker say it will ignore the part.
                handlers.walker_callback(
                    {
                        "handlers": helpers.ContentHandlers(),
                        "excluded": [],
                        "data": None,
                        "frequency": None,
                    },
                    filename,
                    payload,
                    headers,
                )

    try:
        handlers.walk(msg, callback, {})
    except Exception as exc:
        out["errors"].append("walking %s parts: %s" % (tag, exc))
    if cc_handler.file_names:
        out["merged_cloud_config"] = copy.deepcopy(cc_handler.cloud_buf)
        out["write_files"] = written_files(cc_handler.cloud_buf, out["errors"])
    handlers.call_end(cc_handler, None, None)
    # cloud-config.txt exactly as cloud-init writes it for the config stages.
    if cc_handler.cloud_fn and os.path.exists(cc_handler.cloud_fn):
        with open(cc_handler.cloud_fn, "rb") as fh:
            out["cloud_config_txt"] = text(fh.read())
    out["errors"].extend(log.take())
    return out


def net_convert(src_path, kind, workdir, macs):
    """Run `cloud-init devel net-convert` for every output kind (in
    parallel: each is a separate cloud-init start-up)."""
    rendered, errors, procs = {}, [], []
    for okind in OUTPUT_KINDS:
        odir = os.path.join(workdir, "net-" + okind)
        argv = [
            sys.executable, "-c", NET_CONVERT_SHIM,
            "--network-data", src_path, "--kind", kind,
            "--distro", "debian", "--output-kind", okind, "-d", odir,
        ]
        for name, mac in macs:
            argv += ["--mac", "%s,%s" % (name, mac)]
        procs.append((okind, odir, subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )))
    for okind, odir, proc in procs:
        _out, err = proc.communicate()
        if proc.returncode != 0:
            lines = [ln for ln in text(err).splitlines() if ln.strip()]
            # Prefer the exception line of a traceback over its tail.
            exc_lines = [
                ln for ln in lines
                if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)
            ]
            lines = exc_lines or lines
            errors.append(
                "net-convert --kind %s --output-kind %s failed (exit %d): %s"
                % (kind, okind, proc.returncode,
                   lines[-1].strip() if lines else "")
            )
            continue
        files = {}
        if os.path.isdir(odir):
            for rel in list_files(odir):
                with open(os.path.join(odir, rel), "rb") as fh:
                    files[rel] = text(fh.read())
        rendered[okind] = files
    return rendered, errors


def parse_state(netcfg, report, log):
    try:
        ns = network_state.parse_net_config_data(netcfg)
        report["network_state"] = jsonable(
            copy.deepcopy(ns._network_state)
        )
    except Exception as exc:
        report["network_errors"].append(
            "parse_net_config_data: %s: %s" % (type(exc).__name__, exc)
        )
    report["network_errors"].extend(log.take())


def judge_nocloud(seed, workdir, report, log):
    try:
        seeded = util.pathprefix2dict(
            seed,
            required=["user-data", "meta-data"],
            optional=["vendor-data", "network-config"],
        )
    except ValueError as exc:
        report["valid_seed"] = False
        report["errors"].append(
            "not a valid NoCloud seed (cloud-init ignores it silently): %s"
            % exc
        )
        return
    mydata = {
        "meta-data": {},
        "user-data": "",
        "vendor-data": "",
        "network-config": None,
    }
    try:
        mydata = ds_nocloud._merge_new_seed(mydata, seeded)
    except Exception as exc:
        report["valid_seed"] = False
        report["errors"].append(
            "loading NoCloud seed: %s: %s" % (type(exc).__name__, exc)
        )
        report["errors"].extend(log.take())
        return
    report["errors"].extend(log.take())
    md_raw = util.load_yaml(seeded["meta-data"])
    if not isinstance(md_raw, dict):
        report["errors"].append(
            "meta-data is not a YAML mapping; cloud-init treats it as empty"
        )
    defaults = {"instance-id": "nocloud", "dsmode": "net"}
    md = util.mergemanydict([mydata["meta-data"], defaults])
    report_meta_data(report, md, "public-keys")
    report["dsmode"] = md.get("dsmode")
    if "instance-id" not in (md_raw or {}):
        report["errors"].append(
            "meta-data has no instance-id; cloud-init falls back to 'nocloud'"
        )
    report["user_data_raw"] = text(mydata["user-data"])
    report["vendor_data_raw"] = text(mydata["vendor-data"])
    report["user_data"] = judge_user_data(
        mydata["user-data"], workdir, "user-data", log
    )
    report["vendor_data"] = judge_user_data(
        mydata["vendor-data"] or None, workdir, "vendor-data", log
    )
    seed_entropy(md, report)
    if "network-config" in seeded:
        raw = seeded["network-config"]
        report["network_config_raw"] = text(raw)
        netcfg = mydata["network-config"]
        if not raw.strip():
            report["network_errors"].append(
                "network-config file is empty; cloud-init ignores it"
            )
        elif not isinstance(netcfg, dict):
            report["network_errors"].append(
                "network-config does not load as a YAML mapping: %r" % netcfg
            )
        else:
            report["network_config"] = jsonable(netcfg)
            if "network" in netcfg:
                report["network_errors"].append(
                    "network-config has a top-level 'network:' wrapper; "
                    "the NoCloud datasource passes it on unwrapped"
                )
            parse_state(netcfg, report, log)
        path = os.path.join(seed, "network-config")
        rendered, errs = net_convert(path, "yaml", workdir, [])
        report["rendered_network"] = rendered
        report["network_errors"].extend(errs)


def report_meta_data(report, md, keys):
    """Marks the seed valid and reports what cloud-init reads of md, the
    merged meta-data: its instance-id, hostname and public keys (the key
    keys: "public-keys" in NoCloud, "public_keys" in config-drive)."""
    report["valid_seed"] = True
    report["meta_data"] = jsonable(md)
    report["instance_id"] = str(md.get("instance-id"))
    report["hostname"] = jsonable(md.get("local-hostname"))
    report["public_keys"] = jsonable(sources.normalize_pubkey_data(md.get(keys)))


def seed_entropy(md, report):
    """Record, base64-encoded, the bytes cloud-init's seed_random module
    would write: the user-data cloud-config's random_seed.data decoded
    with the module's own decoder, then the datasource's metadata
    random_seed (config-2's meta_data.json, already base64-decoded by the
    reader)."""
    ud = report.get("user_data") or {}
    cfg = (ud.get("merged_cloud_config") or {}).get("random_seed") or {}
    buf = b""
    try:
        from cloudinit.config import cc_seed_random

        if isinstance(cfg, dict) and cfg.get("data"):
            buf += cc_seed_random._decode(
                cfg["data"], encoding=cfg.get("encoding")
            )
        if isinstance(md, dict) and "random_seed" in md:
            buf += util.encode_text(md["random_seed"])
    except Exception as exc:
        report["errors"].append(
            "seed_random: %s: %s" % (type(exc).__name__, exc)
        )
        return
    if buf:
        report["random_seed"] = base64.b64encode(buf).decode("ascii")


def judge_configdrive(seed, workdir, report, log):
    try:
        results = openstack.ConfigDriveReader(seed).read_v2()
    except (openstack.NonReadable, openstack.BrokenMetadata) as exc:
        report["valid_seed"] = False
        report["errors"].append(
            "ConfigDriveReader.read_v2: %s: %s" % (type(exc).__name__, exc)
        )
        report["errors"].extend(log.take())
        return
    except Exception as exc:
        report["valid_seed"] = False
        report["errors"].append(
            "ConfigDriveReader.read_v2 raised %s: %s"
            % (type(exc).__name__, exc)
        )
        return
    report["errors"].extend(log.take())
    md = util.mergemanydict(
        [results.get("metadata", {}), ds_configdrive.DEFAULT_METADATA]
    )
    report_meta_data(report, md, "public_keys")
    report["dsmode"] = results.get("dsmode")
    report["injected_files"] = jsonable(results.get("files", {}))
    report["network_eni"] = jsonable(results.get("network_config"))
    report["ec2_metadata"] = jsonable(results.get("ec2-metadata"))

    ud = results.get("userdata")
    report["user_data_raw"] = text(ud)
    report["user_data"] = judge_user_data(ud, workdir, "user-data", log)
    vd = results.get("vendordata")
    try:
        vd_raw = sources.convert_vendordata(vd)
    except ValueError as exc:
        report["errors"].append("Invalid content in vendor-data: %s" % exc)
        vd_raw = None
    report["vendor_data_raw"] = jsonable(vd_raw)
    report["vendor_data"] = judge_user_data(
        vd_raw, workdir, "vendor-data", log
    )
    seed_entropy(md, report)

    nd = results.get("networkdata")
    if nd is not None:
        report["network_config_raw"] = json.dumps(nd, sort_keys=True)
        # The guest is assumed to have one NIC per link MAC, named eth0..N
        # in link order, which is what a libvirt guest with those NICs sees.
        macs = []
        if isinstance(nd, dict):
            for link in nd.get("links", []) or []:
                mac = isinstance(link, dict) and link.get(
                    "ethernet_mac_address"
                )
                if mac and mac.lower() not in [m for _, m in macs]:
                    macs.append(("eth%d" % len(macs), mac.lower()))
        report["assumed_macs"] = {m: n for n, m in macs}
        try:
            netcfg = openstack.convert_net_json(
                nd, known_macs={m: n for n, m in macs}
            )
            report["network_config"] = jsonable(netcfg)
            parse_state(netcfg, report, log)
        except Exception as exc:
            report["network_errors"].append(
                "convert_net_json: %s: %s" % (type(exc).__name__, exc)
            )
        report["network_errors"].extend(log.take())
        path = os.path.join(
            seed, "openstack", "latest", "network_data.json"
        )
        if os.path.exists(path):
            rendered, errs = net_convert(
                path, "network_data.json", workdir, macs
            )
            report["rendered_network"] = rendered
            report["network_errors"].extend(errs)


def main_user_data(paths):
    """--user-data FILE...: what cloud-init makes of each raw document as
    user-data (no image, no schema check); one JSON list on stdout."""
    log = LogCollector()
    logging.getLogger().addHandler(log)
    logging.getLogger().setLevel(logging.WARNING)
    workdir = tempfile.mkdtemp(prefix="vmpayload-judge-")
    out = []
    try:
        for i, p in enumerate(paths):
            with open(p, "rb") as fh:
                raw = fh.read()
            out.append(judge_user_data(
                raw, workdir, "doc-%d" % i, log, schema=False
            ))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    json.dump(jsonable(out), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--user-data":
        return main_user_data(argv[2:])
    if len(argv) < 2:
        sys.stderr.write("usage: judge.py IMAGE [IMAGE...] | --user-data FILE...\n")
        return 2
    need_tools()
    for image in argv[1:]:
        if not os.path.isfile(image):
            sys.stderr.write("judge: %s: not a regular file\n" % image)
            return 2
    log = LogCollector()
    logging.getLogger().addHandler(log)
    logging.getLogger().setLevel(logging.WARNING)
    reports = [judge_image(os.path.abspath(i), log) for i in argv[1:]]
    out = reports[0] if len(reports) == 1 else reports
    json.dump(jsonable(out), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


def judge_image(image, log):
    """The report on one image."""
    report = {
        "image": image,
        "cloud_init_version": ci_version.version_string(),
        "fs_type": "",
        "label": "",
        "datasource": "",
        "valid_seed": False,
        "files": [],
        "meta_data": None,
        "instance_id": None,
        "hostname": None,
        "public_keys": [],
        "dsmode": None,
        "user_data_raw": None,
        "vendor_data_raw": None,
        "user_data": None,
        "vendor_data": None,
        "network_config_raw": None,
        "network_config": None,
        "network_state": None,
        "rendered_network": {},
        "network_errors": [],
        "random_seed": None,
        "errors": [],
    }
    info, rc = probe(image)
    report["fs_type"] = info.get("TYPE", "")
    report["label"] = info.get("LABEL", "")
    if rc != 0 and not info:
        report["errors"].append(
            "blkid found no filesystem signature (exit %d)" % rc
        )
    report["label_fatboot"] = info.get("LABEL_FATBOOT", "")
    fstype, label = report["fs_type"], report["label"]
    # DataSourceNoCloud._get_devices: LABEL=CIDATA, LABEL=cidata or
    # LABEL_FATBOOT=cidata; DataSourceConfigDrive: LABEL only.
    if fstype in SEED_FSTYPES and (
        label in NOCLOUD_LABELS or report["label_fatboot"] == "cidata"
    ):
        report["datasource"] = "NoCloud"
    elif fstype in SEED_FSTYPES and label in CONFIGDRIVE_LABELS:
        report["datasource"] = "ConfigDrive"
    else:
        report["errors"].append(
            "not a cloud-init seed: TYPE=%r LABEL=%r (NoCloud needs "
            "iso9660/vfat labelled cidata/CIDATA, ConfigDrive config-2/"
            "CONFIG-2)" % (fstype, label)
        )

    workdir = tempfile.mkdtemp(prefix="vmpayload-judge-")
    try:
        seed = os.path.join(workdir, "seed")
        os.mkdir(seed)
        if fstype in SEED_FSTYPES and extract(image, fstype, seed, report):
            report["files"] = list_files(seed)
            if report["datasource"] == "NoCloud":
                judge_nocloud(seed, workdir, report, log)
            elif report["datasource"] == "ConfigDrive":
                judge_configdrive(seed, workdir, report, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report["errors"].extend(log.take())
    return report


if __name__ == "__main__":
    sys.exit(main(sys.argv))
