"""What a request asks Python to run, and whether a worker forked from the
server can run it exactly as a fresh `python3 ...` would: the same
interpreter, Python options no other than -u, -B and -m, the same start-up
variables (locale variables may name another installed locale of the same
encoding: the worker takes it, take_locale), and a module path on which
every preloaded package comes from the file the server imported. Anything
else is Cold.

These checks run in the worker after it took the client's credentials
(worker.py), so they see the paths as the client sees them.
"""

import importlib.machinery
import locale
import os
import site
import sys

from edt._warm.protocol import Cold

# Variables Python reads at start-up that a forked interpreter cannot change.
STARTUP_VARIABLES = (
    "PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONDEBUG", "PYTHONINSPECT", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
    "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONMALLOC", "PYTHONDEVMODE", "PYTHONWARNINGS", "PYTHONPLATLIBDIR",
    "PYTHONUTF8", "PYTHONCOERCECLOCALE", "PYTHONEXECUTABLE", "PYTHONTRACEMALLOC", "PYTHONPROFILEIMPORTTIME",
    "PYTHONFAULTHANDLER", "PYTHONNODEBUGRANGES", "PYTHONINTMAXSTRDIGITS",
)

# What Python takes from the locale variables at start-up is LC_CTYPE's
# locale (setlocale) and what follows from its encoding: the file system's
# and the standard streams' encoding, and under the C locale its coercion
# to C.UTF-8 and UTF-8 mode (PEPs 538 and 540). ssh passes a user's LANG
# and LC_* into a container (AcceptEnv), so they often differ from the
# server's while naming the same encoding.
LOCALE_VARIABLES = ("LC_ALL", "LC_CTYPE", "LANG")


def ctype_locale(env):
    """The LC_CTYPE locale the C library picks from `env`."""
    return next((env[name] for name in LOCALE_VARIABLES if env.get(name)), "C")


def encoding_of(name):
    if name in ("C", "POSIX"):
        return "C"
    codeset = name.partition(".")[2].partition("@")[0].lower().replace("-", "")
    return "UTF-8" if codeset == "utf8" else name


def server_encoding():
    # A server started in the C locale was coerced: its environment says
    # C.UTF-8 (LC_CTYPE), its flags UTF-8 mode.
    if sys.flags.utf8_mode and os.environ.get("PYTHONUTF8") is None:
        return "C"
    return encoding_of(ctype_locale(os.environ))


def parse_command(argv):
    """(options, kind, target, args) of `python3 [-u] [-B] (script | -m module) args...`."""
    options, i = set(), 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        flag = argv[i]
        if flag == "-m":
            if i + 1 >= len(argv):
                raise Cold("-m needs a module name")
            return options, "module", argv[i + 1], argv[i + 2:]
        if flag in ("-u", "-B", "-uB", "-Bu"):
            options.update(flag[1:])
        else:
            raise Cold("the Python option %s is not served warm" % flag)
        i += 1
    if i >= len(argv):
        raise Cold("no script to run")
    return options, "script", argv[i], argv[i + 1:]


def which(program, path):
    if "/" in program:
        return program
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    raise Cold("%s is not on PATH" % program)


def check_interpreter(argv, env, interpreter_id):
    """The interpreter argv[0] names is the server's. Returns the virtual
    environment it runs in where that is not the server's own (None where
    it is): a venv's python is a link to the same file but runs with the
    venv's packages, which the worker then takes (venv_site). Only a venv
    that sees the system's packages, over a server outside any venv, is
    served: the server's preloaded modules must be ones it would import."""
    path = which(argv[0], env.get("PATH", os.defpath))
    found = os.stat(path)
    if (found.st_dev, found.st_ino) != interpreter_id:
        raise Cold("%s is not the interpreter this server runs (%s)" % (argv[0], sys.executable))
    prefix = venv_of(path) or sys.base_prefix
    if os.path.realpath(prefix) == os.path.realpath(sys.prefix):
        return None
    if sys.prefix != sys.base_prefix or not sees_system_packages(prefix):
        raise Cold("%s runs in the environment %s, not the warm interpreter's (%s)" % (path, prefix, sys.prefix))
    return prefix


def venv_of(program):
    """The virtual environment `program` (an interpreter's path, links not
    followed) starts in: where Python finds pyvenv.cfg, in its directory or
    the one above; None outside one."""
    directory = os.path.dirname(os.path.abspath(program))
    for candidate in (directory, os.path.dirname(directory)):
        if os.path.isfile(os.path.join(candidate, "pyvenv.cfg")):
            return candidate
    return None


def sees_system_packages(venv):
    """Whether the venv was made with --system-site-packages (pyvenv.cfg)."""
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() == "include-system-site-packages":
                    return value.strip().lower() == "true"
    except OSError:
        pass
    return False


def venv_site(venv):
    return os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def check_startup_variables(env):
    for name in STARTUP_VARIABLES:
        if env.get(name) != os.environ.get(name):
            raise Cold("%s differs from the warm interpreter's" % name)
    for name in set(env) | set(os.environ):
        if name.startswith("TORCH_") and env.get(name) != os.environ.get(name):
            raise Cold("%s (read when torch is imported) differs from the warm interpreter's" % name)
    check_locale(env)


def check_locale(env):
    ours = server_encoding()
    if ours == "C":  # the coercion a fresh Python makes is the same only with the same variables
        for name in LOCALE_VARIABLES:
            if env.get(name) != os.environ.get(name):
                raise Cold("%s differs from the warm interpreter's" % name)
        return
    theirs = ctype_locale(env)
    if encoding_of(theirs) != ours:
        raise Cold("the locale %s (LC_ALL, LC_CTYPE, LANG) has another encoding than the warm interpreter's (%s)"
                   % (theirs, ours))


def take_locale(env):
    """The client's LC_CTYPE locale, as Python's start-up sets it; Cold if
    it is not installed (a fresh Python would fall back to C)."""
    if ctype_locale(env) == ctype_locale(os.environ):
        return
    try:
        locale.setlocale(locale.LC_CTYPE, ctype_locale(env))
    except locale.Error:
        # ssh brings it from the user's terminal (macOS sets LC_CTYPE=UTF-8):
        # say what to change, as a user sees this only under EDT_LOG_LEVEL=debug.
        raise Cold("the locale %s is not installed (a fresh python3 would run in UTF-8 mode, which a warm worker "
                   "cannot); unset it or name an installed one (locale -a), e.g. C.UTF-8" % ctype_locale(env)) from None


def module_path(first, env, venv=None):
    """sys.path as a fresh interpreter with `env` would have it: `first`,
    then PYTHONPATH, then the standard entries, with the user's site
    directory and the site-packages of `venv` (check_interpreter's) before
    the system's, where site.py puts them."""
    ours = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    ours += [os.path.abspath(p) for p in ours]
    theirs = [p for p in env.get("PYTHONPATH", "").split(":") if p]
    base = [p for p in sys.path[1:] if p not in ours and p != site.USER_SITE]
    added = [venv_site(venv)] if venv else []
    if site.ENABLE_USER_SITE and env.get("HOME"):
        user = os.path.join(env["HOME"], ".local/lib/python%d.%d/site-packages" % sys.version_info[:2])
        if os.path.isdir(user):
            added.insert(0, user)
    system = [i for i, p in enumerate(base) if p in site.getsitepackages()]
    at = system[0] if system else len(base)
    return [first] + theirs + base[:at] + added + base[at:]


def check_preloaded(path, packages):
    """Each preloaded package would be imported from the same file. Only
    entries the server's own sys.path lacks (the script's directory, the
    client's PYTHONPATH, its user site) can change that, unless the order of
    the shared ones changed: those are listed once, and a package whose name
    appears in one is looked up in full."""
    ours = set(sys.path[1:])
    shared = [p for p in path[1:] if p in ours]
    kept = set(shared)
    if shared != [p for p in sys.path[1:] if p in kept]:
        suspects = set(packages)
    else:
        suspects = set()
        for entry in (p for p in path if p not in ours):
            try:
                names = os.listdir(entry or ".")
            except OSError:
                continue
            suspects.update(n.partition(".")[0] for n in names)
    for name in sorted(suspects & set(packages)):
        module = sys.modules.get(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = spec.origin if spec and spec.origin else None
        if module is not None and (origin is None or os.path.realpath(origin) != os.path.realpath(module.__file__)):
            raise Cold("on this PYTHONPATH %s would come from %s, not %s" % (name, origin or "nowhere", module.__file__))
