//! Images scaled within `--max-image-px` and `--max-image-megapixels` and re-encoded as the
//! smallest faithful form: PNG, JPEG, or an 8-bit palette PNG.
//!
//! Plots are most of what notebooks show, and a plot's colours are a colormap's 256 shades, its
//! text and their antialiased edges: a palette of 256 holds them with no visible change, at a
//! third of a full-colour PNG's bytes and about half a JPEG's. A palette is used only when it is
//! exact or at least as faithful as the JPEG would be (`PALETTE_MIN_PSNR`); a photograph fails
//! that and goes out as JPEG.

use std::collections::HashSet;
use std::io::Cursor;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use image::{DynamicImage, RgbaImage};

use super::super::outputs::Rendered;
use crate::config::OutputLimits;

/// JPEG quality of a re-encoded image.
const JPEG_QUALITY: u8 = 85;
/// The least peak signal-to-noise ratio (dB, over RGB) of a quantized palette: about what JPEG
/// at quality 85 keeps of a plot, and well above where banding shows.
const PALETTE_MIN_PSNR: f64 = 40.0;
/// NeuQuant's sampling factor: 1 looks at every pixel, 30 at every 30th; 10 is its
/// recommended balance of speed and quality.
const PALETTE_SAMPLING: i32 = 10;

/// An image within the bounds, re-encoded as the smallest of its faithful forms, with a line
/// saying so; as it came when it already fits or cannot be read.
pub(super) fn image(
    data: &str,
    mime_type: &str,
    limits: OutputLimits,
    whole: &str,
) -> (Rendered, Option<String>) {
    let keep = || Rendered::Image {
        data: data.to_owned(),
        mime_type: mime_type.to_owned(),
    };
    let Ok(bytes) = BASE64.decode(data) else {
        return (keep(), None);
    };
    let Ok(decoded) = image::load_from_memory(&bytes) else {
        return (keep(), None);
    };
    let (width, height) = (decoded.width(), decoded.height());
    let Some((to_w, to_h)) = scaled_size(width, height, limits) else {
        return (keep(), None);
    };
    let scaled = decoded.resize_exact(to_w, to_h, image::imageops::FilterType::Triangle);
    let Some((encoded, mime)) = smallest_encoding(&scaled) else {
        return (keep(), None);
    };
    let note = format!(
        "[Image scaled from {width}×{height} to {to_w}×{to_h} px ({} → {}, {} → {} bytes); \
         the original: {whole}]",
        short_mime(mime_type),
        short_mime(mime),
        bytes.len(),
        encoded.len()
    );
    (
        Rendered::Image {
            data: BASE64.encode(&encoded),
            mime_type: mime.to_owned(),
        },
        Some(note),
    )
}

/// An image as a link serves it: within the bounds (scaled and re-encoded as [`image`] does it,
/// else as it came), with its size.
#[derive(Debug, Clone, PartialEq)]
pub struct Sized {
    /// Base64, as MCP carries blobs.
    pub data: String,
    pub mime_type: String,
    pub width: u32,
    pub height: u32,
    /// Of the image itself, decoded from base64.
    pub bytes: usize,
}

/// The image within the bounds, with its size; `None` when it cannot be read.
pub fn sized(data: &str, mime_type: &str, limits: OutputLimits) -> Option<Sized> {
    let data: String = data.split_whitespace().collect();
    let bytes = BASE64.decode(&data).ok()?;
    let decoded = image::load_from_memory(&bytes).ok()?;
    let (width, height) = (decoded.width(), decoded.height());
    let as_it_came = Sized {
        width,
        height,
        bytes: bytes.len(),
        data: data.clone(),
        mime_type: mime_type.to_owned(),
    };
    let Some((to_w, to_h)) = scaled_size(width, height, limits) else {
        return Some(as_it_came);
    };
    let scaled = decoded.resize_exact(to_w, to_h, image::imageops::FilterType::Triangle);
    let Some((encoded, mime)) = smallest_encoding(&scaled) else {
        return Some(as_it_came);
    };
    Some(Sized {
        width: to_w,
        height: to_h,
        bytes: encoded.len(),
        data: BASE64.encode(&encoded),
        mime_type: mime.to_owned(),
    })
}

/// The smallest of PNG, JPEG (opaque images only) and a faithful palette PNG.
fn smallest_encoding(scaled: &DynamicImage) -> Option<(Vec<u8>, &'static str)> {
    let mut candidates = Vec::new();
    let mut png = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut png,
        image::codecs::png::CompressionType::Best,
        image::codecs::png::FilterType::Adaptive,
    );
    if scaled.write_with_encoder(encoder).is_ok() {
        candidates.push((png, "image/png"));
    }
    let rgba = scaled.to_rgba8();
    if rgba.pixels().all(|p| p.0[3] == 255) {
        let mut jpeg = Vec::new();
        if image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut jpeg), JPEG_QUALITY)
            .encode_image(&scaled.to_rgb8())
            .is_ok()
        {
            candidates.push((jpeg, "image/jpeg"));
        }
    }
    if let Some(indexed) = palette_png(&rgba) {
        candidates.push((indexed, "image/png"));
    }
    candidates.into_iter().min_by_key(|(bytes, _)| bytes.len())
}

/// The image as an 8-bit palette PNG: exact when it has at most 256 colours, else quantized
/// (NeuQuant) when that stays within `PALETTE_MIN_PSNR`; `None` when a palette would show.
fn palette_png(rgba: &RgbaImage) -> Option<Vec<u8>> {
    let (palette, indices) = exact_palette(rgba).or_else(|| quantized_palette(rgba))?;
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, rgba.width(), rgba.height());
    encoder.set_color(png::ColorType::Indexed);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_palette(
        palette
            .iter()
            .flat_map(|c| [c[0], c[1], c[2]])
            .collect::<Vec<_>>(),
    );
    if palette.iter().any(|c| c[3] != 255) {
        encoder.set_trns(palette.iter().map(|c| c[3]).collect::<Vec<_>>());
    }
    encoder.set_compression(png::Compression::High);
    // Filters help photographs' gradients; a palette's indices compress best unfiltered.
    encoder.set_filter(png::Filter::NoFilter);
    let mut writer = encoder.write_header().ok()?;
    writer.write_image_data(&indices).ok()?;
    writer.finish().ok()?;
    Some(out)
}

type Palette = (Vec<[u8; 4]>, Vec<u8>);

/// The image's own colours as a palette and each pixel's index, if there are at most 256.
fn exact_palette(rgba: &RgbaImage) -> Option<Palette> {
    let mut seen = HashSet::new();
    for pixel in rgba.pixels() {
        if seen.insert(pixel.0) && seen.len() > 256 {
            return None;
        }
    }
    let palette: Vec<[u8; 4]> = seen.into_iter().collect();
    let index_of: std::collections::HashMap<[u8; 4], u8> = palette
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, i as u8))
        .collect();
    let indices = rgba.pixels().map(|p| index_of[&p.0]).collect();
    Some((palette, indices))
}

/// A 256-colour palette learnt from the image, if the image mapped onto it stays faithful.
fn quantized_palette(rgba: &RgbaImage) -> Option<Palette> {
    let raw = rgba.as_raw();
    let quantizer = color_quant::NeuQuant::new(PALETTE_SAMPLING, 256, raw);
    let palette: Vec<[u8; 4]> = quantizer
        .color_map_rgba()
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let mut squared_error = 0u64;
    let indices: Vec<u8> = raw
        .chunks_exact(4)
        .map(|pixel| {
            let index = quantizer.index_of(pixel);
            let chosen = palette[index];
            for channel in 0..3 {
                let d = i64::from(pixel[channel]) - i64::from(chosen[channel]);
                squared_error += (d * d) as u64;
            }
            index as u8
        })
        .collect();
    let samples = (raw.len() / 4 * 3).max(1) as f64;
    let mse = squared_error as f64 / samples;
    let psnr = if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    };
    (psnr >= PALETTE_MIN_PSNR).then_some((palette, indices))
}

fn short_mime(mime: &str) -> &str {
    match mime {
        "image/png" => "PNG",
        "image/jpeg" => "JPEG",
        other => other,
    }
}

/// The size an image is scaled to, or `None` when it fits both bounds already.
fn scaled_size(width: u32, height: u32, limits: OutputLimits) -> Option<(u32, u32)> {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let by_side = f64::from(limits.max_image_px) / w.max(h);
    let by_area = (limits.max_image_megapixels * 1e6 / (w * h)).sqrt();
    let scale = by_side.min(by_area);
    if scale >= 1.0 {
        return None;
    }
    let size = |side: f64| ((side * scale).floor() as u32).max(1);
    Some((size(w), size(h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_scale_to_both_bounds() {
        let limits = OutputLimits::text(0, true);
        let (w, h) = scaled_size(2584, 1627, limits).unwrap();
        assert!(
            w <= 1568 && h <= 1568 && f64::from(w * h) <= 1.15e6,
            "{w}x{h}"
        );
        assert!(scaled_size(800, 600, limits).is_none());
        let (w, h) = scaled_size(4000, 100, limits).unwrap();
        assert_eq!((w, h), (1568, 39));
    }

    /// A plot-like image: a white ground, a viridis-like ramp of dots with soft edges.
    fn plot(width: u32, height: u32) -> RgbaImage {
        RgbaImage::from_fn(width, height, |x, y| {
            let (cx, cy) = ((x % 40) as f64 - 20.0, (y % 40) as f64 - 20.0);
            let r = (cx * cx + cy * cy).sqrt();
            let cover = (12.0 - r).clamp(0.0, 1.0);
            let t = f64::from(x) / f64::from(width);
            let dot = [68.0 + 185.0 * t, 1.0 + 230.0 * t, 84.0 - 47.0 * t];
            let px = |c: f64| (255.0 * (1.0 - cover) + c * cover).round() as u8;
            image::Rgba([px(dot[0]), px(dot[1]), px(dot[2]), 255])
        })
    }

    fn decoded(bytes: &[u8]) -> RgbaImage {
        image::load_from_memory(bytes).unwrap().to_rgba8()
    }

    #[test]
    fn a_plot_goes_out_as_a_faithful_palette_smaller_than_jpeg() {
        let plot = DynamicImage::ImageRgba8(plot(1200, 800));
        let (bytes, mime) = smallest_encoding(&plot).unwrap();
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(Cursor::new(&mut jpeg), JPEG_QUALITY)
            .encode_image(&plot.to_rgb8())
            .unwrap();
        assert_eq!(mime, "image/png");
        assert!(
            bytes.len() < jpeg.len(),
            "{} vs {}",
            bytes.len(),
            jpeg.len()
        );
        let back = decoded(&bytes);
        assert_eq!(back.dimensions(), (1200, 800));
        let worst = back
            .pixels()
            .zip(plot.to_rgba8().pixels())
            .flat_map(|(a, b)| (0..3).map(move |c| a.0[c].abs_diff(b.0[c])))
            .max()
            .unwrap();
        assert!(worst <= 24, "a colour moved by {worst}");
    }

    #[test]
    fn few_colours_are_kept_exactly_and_transparency_too() {
        let image = RgbaImage::from_fn(64, 32, |x, _| {
            image::Rgba([(x * 4) as u8, 10, 200, if x < 8 { 0 } else { 255 }])
        });
        let bytes = palette_png(&image).unwrap();
        assert_eq!(decoded(&bytes), image);
    }

    #[test]
    fn noise_is_not_forced_into_a_palette() {
        let mut state = 0x2545_f491_u32;
        let noise = RgbaImage::from_fn(256, 256, |_, _| {
            let mut next = || {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state & 0xff) as u8
            };
            image::Rgba([next(), next(), next(), 255])
        });
        assert!(palette_png(&noise).is_none());
    }
}
