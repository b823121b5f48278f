"""OCI image layouts written by the tests (tests/images, tests/slurm) and the
image benchmarks: Layout writes blobs, gzip layers, configs, manifests and
index.json with Python's tarfile and gzip; tiny_root() makes a root a
container runs (the host's sshd, bash and their libraries); add_trainer()
puts an image User's entries in a layer."""
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile


def tiny_root(root):
    """The host's bash, sh, env, cat and their libraries, /etc's users (but sshd's), merged /usr's links: no
    OpenSSH, which edt brings (its tool bundle, docs/images.md)."""
    os.makedirs(root + "/etc")
    files = set()
    for program in ("/bin/bash", "/bin/sh", "/usr/bin/env", "/usr/bin/cat"):
        files.add(program)
        for word in subprocess.run(["ldd", program], check=True, capture_output=True, text=True).stdout.split():
            if word.startswith("/"):
                files.add(word)
    for path in sorted(files) + ["/etc/passwd", "/etc/group", "/etc/nsswitch.conf"]:
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        os.makedirs(root + os.path.dirname(real), exist_ok=True)
        shutil.copy2(path, root + real)
    with open("/etc/passwd") as f:
        users = [line for line in f if not line.startswith("sshd:")]
    with open(root + "/etc/passwd", "w") as f:
        f.writelines(users)
    for top in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink("/" + top):
            os.symlink(os.readlink("/" + top), root + "/" + top)


# A User for the tests' images: trainer (uid and gid 1234), also in group crew (2345).
TRAINER = ("trainer:x:1234:1234:Trainer:/home/trainer:/bin/bash\n", "trainer:x:1234:\ncrew:x:2345:trainer\n")


def add_file(tar, name, data, mode=0o644, uid=0):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid = len(data), mode, uid
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, name, uid=0):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid = tarfile.DIRTYPE, 0o755, uid
    tar.addfile(info)


def add_trainer(tar, root):
    """In a layer over tiny_root(`root`): its /etc/passwd and /etc/group with TRAINER's lines, and trainer's
    home, /home/trainer, holding from-image ("the image's home")."""
    for name, extra in zip(("passwd", "group"), TRAINER):
        with open(root + "/etc/" + name, "rb") as f:
            add_file(tar, "etc/" + name, f.read() + extra.encode())
    add_dir(tar, "home")
    add_dir(tar, "home/trainer", 1234)
    add_file(tar, "home/trainer/from-image", b"the image's home\n", uid=1234)


class Layout:
    """An OCI image layout written here (Python's tarfile and gzip): umoci
    0.4's insert writes tars without their last padding, which tar readers
    refuse."""

    def __init__(self, path):
        self.path = path
        self.index = {"schemaVersion": 2, "manifests": []}
        os.makedirs(path + "/blobs/sha256")
        with open(path + "/oci-layout", "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)

    def blob(self, data, media_type):
        digest = hashlib.sha256(data).hexdigest()
        with open(self.path + "/blobs/sha256/" + digest, "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}

    def layer(self, add):
        """A gzip layer of what add(tar) puts in a tar; (descriptor, diff id)."""
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            add(tar)
        data = raw.getvalue()
        return (self.blob(gzip.compress(data, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"),
                "sha256:" + hashlib.sha256(data).hexdigest())

    def image(self, tag, layers, config):
        config = {"architecture": "amd64", "os": "linux", "config": config,
                  "rootfs": {"type": "layers", "diff_ids": [diff for _, diff in layers]}}
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": self.blob(json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json"),
                    "layers": [d for d, _ in layers]}
        entry = self.blob(json.dumps(manifest).encode(), manifest["mediaType"])
        entry["annotations"] = {"org.opencontainers.image.ref.name": tag}
        self.index["manifests"].append(entry)
        with open(self.path + "/index.json", "w") as f:
            json.dump(self.index, f)
