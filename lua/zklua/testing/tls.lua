--- zklua.testing.tls — throwaway TLS files for test servers and clients, made with openssl.
--
--   local files = require("zklua.testing.tls").make(dir)
--   -- files.ca, files.server (key and certificate, the PEM "keystore" ZooKeeper reads),
--   -- files.certfile, files.keyfile (a client's), files.dir
--   require("zklua.testing.tls").certificate(files, "name", {days = -1, self_signed = true,
--                                                            password = "pw",
--                                                            subject = "/O=zklua/CN=name"})
--   require("zklua.testing.tls").subject(certfile) -- "CN=name,O=zklua": the x509 ACL id
--   require("zklua.testing.tls").ca(dir)           -- a CA alone: {dir, ca, ca_key}
--
-- One CA per call of make(); certificates of 2048-bit RSA keys (ZooKeeper's PEM reader takes
-- RSA), the server's for 127.0.0.1 and localhost.  certificate() makes more client
-- certificates under the same CA: expired ones (days < 0), self-signed ones, keys
-- encrypted with a password, other subjects.  Every openssl run is checked: a failure raises with its output.
local tls = {}

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function openssl(args)
  local pipe = assert(io.popen("openssl " .. args .. " 2>&1; echo \"rc=$?\"", "r"))
  local out = pipe:read("*a")
  pipe:close()
  if not out:match("rc=0%s*$") then error("openssl " .. args .. " failed:\n" .. out, 2) end
  return (out:gsub("rc=0%s*$", ""))
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function read_file(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("*a")
  f:close()
  return text
end

--- A key and a certificate named name in files.dir: signed by files' CA (or by itself with
-- self_signed), valid from now for days days (negative: expired days ago), for the host
-- names in hosts (a server's), the key encrypted with password when given, for the subject
-- subject (openssl's -subj form, "/O=org/CN=name"; default "/CN=" .. name).
-- Returns the certificate's and the key's paths.
function tls.certificate(files, name, opts)
  opts = opts or {}
  local dir = files.dir
  local key, csr, cert = dir .. "/" .. name .. "-key.pem", dir .. "/" .. name .. ".csr",
                         dir .. "/" .. name .. ".pem"
  local ext = dir .. "/" .. name .. ".ext"
  write_file(ext, opts.hosts and "subjectAltName=" .. opts.hosts .. "\n" or
                  "basicConstraints=CA:FALSE\n")
  openssl("genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out " .. shell_quote(key))
  openssl("req -new -key " .. shell_quote(key) .. " -subj " .. shell_quote(opts.subject or "/CN=" .. name) ..
          " -out " .. shell_quote(csr))
  local days = opts.days or 3650
  -- x509 -days counts from now; an expired certificate is one whose end lies in the past:
  -- signed by a throwaway CA config with explicit dates (ca -startdate/-enddate)
  if days < 0 then
    local start = os.date("!%Y%m%d%H%M%SZ", os.time() + (days - 1) * 86400)
    local stop = os.date("!%Y%m%d%H%M%SZ", os.time() + days * 86400)
    local cadir = dir .. "/" .. name .. "-ca"
    os.execute("mkdir -p " .. shell_quote(cadir) .. " && : > " .. shell_quote(cadir .. "/index"))
    write_file(cadir .. "/serial", "1000\n")
    write_file(cadir .. "/ca.cnf", table.concat({
      "[ca]", "default_ca = d", "[d]", "database = " .. cadir .. "/index",
      "serial = " .. cadir .. "/serial", "new_certs_dir = " .. cadir,
      "default_md = sha256", "policy = p", "[p]", "commonName = supplied", "" }, "\n"))
    openssl("ca -batch -config " .. shell_quote(cadir .. "/ca.cnf") .. " -cert " ..
            shell_quote(files.ca) .. " -keyfile " .. shell_quote(files.ca_key) ..
            " -startdate " .. start .. " -enddate " .. stop .. " -extfile " ..
            shell_quote(ext) .. " -in " .. shell_quote(csr) .. " -out " .. shell_quote(cert))
  elseif opts.self_signed then
    openssl("x509 -req -in " .. shell_quote(csr) .. " -signkey " .. shell_quote(key) ..
            " -days " .. days .. " -extfile " .. shell_quote(ext) .. " -out " ..
            shell_quote(cert))
  else
    openssl("x509 -req -in " .. shell_quote(csr) .. " -CA " .. shell_quote(files.ca) ..
            " -CAkey " .. shell_quote(files.ca_key) .. " -CAcreateserial -days " .. days ..
            " -extfile " .. shell_quote(ext) .. " -out " .. shell_quote(cert))
  end
  if opts.password then
    local plain = key .. ".plain"
    os.rename(key, plain)
    openssl("pkey -in " .. shell_quote(plain) .. " -aes256 -passout " ..
            shell_quote("pass:" .. opts.password) .. " -out " .. shell_quote(key))
    os.remove(plain)
  end
  return cert, key
end

--- A certificate's subject as ZooKeeper's X509AuthenticationProvider names the client that
-- presents it (Java's X500Principal.getName(), RFC 2253: "CN=name,OU=unit,O=org", the most
-- specific part first, no spaces): the id of an x509 ACL for it.
function tls.subject(certfile)
  local out = openssl("x509 -noout -subject -nameopt RFC2253 -in " .. shell_quote(certfile))
  return assert(out:match("^subject=(.-)%s*$"), "no subject in " .. out)
end

--- A new CA alone in dir (created if missing): {dir, ca, ca_key}, for certificate().
function tls.ca(dir)
  os.execute("mkdir -p " .. shell_quote(dir))
  local files = { dir = dir, ca = dir .. "/ca.pem", ca_key = dir .. "/ca-key.pem" }
  openssl("req -x509 -newkey rsa:2048 -nodes -keyout " .. shell_quote(files.ca_key) ..
          " -subj /CN=zklua-test-ca -days 3650 -out " .. shell_quote(files.ca))
  return files
end

--- A new CA in dir (created if missing), a server certificate for 127.0.0.1 and localhost,
-- and a client certificate, all signed by the CA.
function tls.make(dir)
  local files = tls.ca(dir)
  local server_cert, server_key = tls.certificate(files, "server",
                                                  { hosts = "IP:127.0.0.1,DNS:localhost" })
  -- ZooKeeper's PEM keystore: the key (PKCS#8) and the certificate in one file
  files.server = dir .. "/server-keystore.pem"
  write_file(files.server, read_file(server_key) .. read_file(server_cert))
  files.certfile, files.keyfile = tls.certificate(files, "client")
  return files
end

return tls
