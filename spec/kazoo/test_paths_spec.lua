-- kazoo's tests/test_paths.py, translated: zklua.paths is kazoo.protocol.paths (normpath,
-- join of many parts, isabs, basename, and kazoo's private _prefix_root and _norm_root as
-- prefix_root and norm_root).  kazoo's ValueError is zklua's BadArgumentsError.
local paths = require "zklua.paths"
local errors = require "zklua.errors"
local helpers = require "support.helpers"

describe("test_paths.py", function()
  -- NormPathTestCase
  it("test_normpath", function()
    assert.are.equal("/a/b", paths.normpath("/a/b"))
  end)

  it("test_normpath_empty", function()
    assert.are.equal("", paths.normpath(""))
  end)

  it("test_normpath_unicode", function()
    assert.are.equal("/\u{e4}/b", paths.normpath("/\u{e4}/b"))
  end)

  it("test_normpath_dots", function()
    assert.are.equal("/a./b../c", paths.normpath("/a./b../c"))
  end)

  it("test_normpath_slash", function()
    assert.are.equal("/", paths.normpath("/"))
  end)

  it("test_normpath_multiple_slashes", function()
    assert.are.equal("/", paths.normpath("//"))
    assert.are.equal("/a/b", paths.normpath("//a/b"))
    assert.are.equal("/a/b", paths.normpath("/a//b//"))
    assert.are.equal("/a/b/c", paths.normpath("//a////b///c/"))
  end)

  it("test_normpath_relative", function()
    helpers.raises(errors.BadArgumentsError, paths.normpath, "./a/b")
    helpers.raises(errors.BadArgumentsError, paths.normpath, "/a/../b")
  end)

  it("test_normpath_trailing", function()
    assert.are.equal("/", paths.normpath("/", true))
  end)

  -- JoinTestCase
  it("test_join", function()
    assert.are.equal("/a", paths.join("/a"))
    assert.are.equal("/a/b/", paths.join("/a", "b/"))
    assert.are.equal("/a/b/c", paths.join("/a", "b", "c"))
  end)

  it("test_join_empty", function()
    assert.are.equal("", paths.join(""))
    assert.are.equal("a/b", paths.join("", "a", "b"))
    assert.are.equal("/a/b/c", paths.join("/a", "", "b/", "c"))
  end)

  it("test_join_absolute", function()
    assert.are.equal("/c", paths.join("/a/b", "/c"))
  end)

  -- IsAbsTestCase
  it("test_isabs", function()
    assert.is_true(paths.isabs("/"))
    assert.is_true(paths.isabs("/a"))
    assert.is_true(paths.isabs("/a//b/c"))
    assert.is_true(paths.isabs("//a/b"))
  end)

  it("test_isabs_false", function()
    assert.is_false(paths.isabs(""))
    assert.is_false(paths.isabs("a/"))
    assert.is_false(paths.isabs("a/../"))
  end)

  -- BaseNameTestCase
  it("test_basename", function()
    assert.are.equal("", paths.basename(""))
    assert.are.equal("", paths.basename("/"))
    assert.are.equal("a", paths.basename("//a"))
    assert.are.equal("", paths.basename("//a/"))
    assert.are.equal("c..", paths.basename("/a/b.//c.."))
  end)

  -- PrefixRootTestCase
  it("test_prefix_root", function()
    assert.are.equal("/a/b/c", paths.prefix_root("/a/", "b/c"))
    assert.are.equal("/a/b/c/d", paths.prefix_root("/a/b", "c/d"))
    assert.are.equal("/a/b/c", paths.prefix_root("/a", "/b/c"))
    assert.are.equal("/a/b/c.", paths.prefix_root("/a", "//b/c."))
  end)

  -- NormRootTestCase
  it("test_norm_root", function()
    assert.are.equal("/", paths.norm_root(""))
    assert.are.equal("/", paths.norm_root("/"))
    assert.are.equal("/a", paths.norm_root("//a"))
    assert.are.equal("/a./b", paths.norm_root("//a./b"))
  end)
end)
