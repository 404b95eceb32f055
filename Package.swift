// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "avgraph",
    products: [
        .library(name: "AVGraph", type: .dynamic, targets: ["AVGraph"]),
        .library(name: "AVGraphNodes", targets: ["AVGraphNodes"]),
        .executable(name: "avgraph", targets: ["avgraph"]),
    ],
    dependencies: [
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CFFmpeg",
            pkgConfig: "libavformat",
            providers: [.apt(["libavcodec-dev", "libavformat-dev", "libavutil-dev", "libswscale-dev", "libswresample-dev"])]
        ),
        .target(name: "AVGraph", dependencies: ["CFFmpeg", "Yams"]),
        .target(name: "AVGraphNodes", dependencies: ["AVGraph", "CFFmpeg"]),
        .executableTarget(
            name: "avgraph",
            dependencies: ["AVGraph", "AVGraphNodes", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(name: "PushExample", dependencies: ["AVGraph", "AVGraphNodes"], path: "Examples/PushExample"),
        .testTarget(name: "AVGraphTests", dependencies: ["AVGraph", "AVGraphNodes", "CFFmpeg"]),
        .testTarget(name: "EndToEndTests", dependencies: ["AVGraph", "CFFmpeg"]),
    ],
    swiftLanguageModes: [.v6]
)
