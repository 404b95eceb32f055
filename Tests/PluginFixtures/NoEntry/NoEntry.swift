// A shared library that is not an avgraph plugin: it exports no `avgraph_plugin`.
@_cdecl("something_else")
public func somethingElse() -> Int32 { 42 }
