"""Headless Chromium, driven through the DevTools protocol over a pipe, for checking nnlab's
HTML reports as a browser draws them (tests/report_browser_test.py) and for the screenshots in
docs/images (scripts/report_screenshots.sh).

Chromium is started with --remote-debugging-pipe: it reads protocol messages (JSON, each ended
by a NUL byte) on its file descriptor 3 and writes its answers and events on descriptor 4.
No network port is opened, and --no-sandbox lets it run as root in a container.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, executable, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="nnlab-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def give_pipes():  # in the child: the protocol pipes as descriptors 3 and 4 (copies
            # first, so that placing one never overwrites the other)
            reads, writes = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(reads, 3)
            os.dup2(writes, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             "--user-data-dir=" + self.profile, "--window-size=%d,%d" % (width, height), "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=give_pipes, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable", session=True)

    def close(self):
        try:
            self.call("Browser.close")
        except (OSError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise RuntimeError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the protocol pipe (it exited with %s)" % self.process.poll())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=False, timeout=30, **params):
        """Sends one command and returns its result; events that arrive meanwhile are kept."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError("%s: %s" % (method, answer["error"].get("message")))
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def open(self, path, width, height):
        """Loads a local file at the given window size; returns the page's errors so far."""
        self.events = []
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", session=True, url="file://" + os.path.abspath(path))
        self.wait_for_event("Page.loadEventFired")
        self.evaluate("new Promise(function (done) { requestAnimationFrame(function () { done(0); }); })")
        return self.errors()

    def errors(self):
        """Uncaught exceptions, console.error calls and error log entries (failed loads)."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append("uncaught exception: " + details.get("exception", {}).get("description", details["text"]))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                found.append("console.error: " + " ".join(str(a.get("value", "")) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                found.append("log error: " + params["entry"]["text"])
        return found

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError("evaluating a check failed: " + result["exceptionDetails"]["text"])
        return result["result"].get("value")

    def move_mouse(self, x, y):
        self.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x, y=y)

    def screenshot(self, path):
        """The whole page, not just the window, as a PNG."""
        size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        png = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        with open(path, "wb") as out:
            out.write(base64.b64decode(png["data"]))
